package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
)

// testExperiments checks store.ExperimentWriter and ExperimentReader
// (every backend must keep experiments): a put reads back as written, a
// put again replaces the record and adds trials without duplicates, the
// list is newest first and pages without gaps, bad documents store
// nothing, and each project sees only its own experiments.
func (s *suite) testExperiments(t *testing.T) {
	st := s.open(t)
	es, ok := st.(store.ExperimentStore)
	if !ok {
		t.Fatalf("%T does not implement store.ExperimentStore: every backend keeps experiments", st)
	}
	ctx := store.WithDefaultProject(context.Background())
	base := time.Date(2026, 4, 2, 9, 30, 0, 123456789, time.UTC)

	exp := func(id string, created time.Time, label, digest, status string) store.StoredExperiment {
		rec := fmt.Sprintf(`{"id":%q,"status":%q,"note":"naïve \"quoted\" <b>"}`, id, status)
		return store.StoredExperiment{ID: id, Name: "name of " + id, Created: created, Label: label, DatasetSHA256: digest,
			Status: status, Record: json.RawMessage(rec), Dataset: json.RawMessage(`{"cases":"{\"id\":\"c1\"}\n"}`)}
	}
	trial := func(c string, n int, trace string) store.StoredTrial {
		return store.StoredTrial{CaseID: c, Trial: n, TraceID: trace, Doc: json.RawMessage(fmt.Sprintf(`{"case_id":%q,"trial":%d,"answer":"a%d"}`, c, n, n))}
	}

	t.Run("PutThenGetReadsBackWhatWasWritten", func(t *testing.T) {
		e := exp("exp-a", base, "v1", "d1", "running")
		trials := []store.StoredTrial{trial("c2", 0, "0af7651916cd43dd8448eb211c80319c"), trial("c1", 1, ""), trial("c1", 0, "")}
		before := time.Now().Add(-time.Second)
		if err := es.PutExperiment(ctx, e, trials); err != nil {
			t.Fatalf("PutExperiment: %v", err)
		}
		got, gotTrials := s.getExperiment(t, es, ctx, "exp-a")
		checkExperiment(t, got, e, true)
		if got.Updated.Before(before) {
			t.Errorf("Updated = %v, want the time of the put (after %v)", got.Updated, before)
		}
		checkTrials(t, gotTrials, []store.StoredTrial{trials[2], trials[1], trials[0]})
	})

	t.Run("PutAgainReplacesTheRecordAndAddsTrials", func(t *testing.T) {
		e := exp("exp-a", base, "v1", "d1", "complete")
		more := []store.StoredTrial{trial("c1", 0, ""), trial("c2", 1, "")}
		more[0].Doc = json.RawMessage(`{"case_id":"c1","trial":0,"answer":"regraded"}`)
		for range 2 { // a retried put changes nothing
			if err := es.PutExperiment(ctx, e, more); err != nil {
				t.Fatalf("PutExperiment: %v", err)
			}
		}
		got, gotTrials := s.getExperiment(t, es, ctx, "exp-a")
		checkExperiment(t, got, e, true)
		checkTrials(t, gotTrials, []store.StoredTrial{more[0], trial("c1", 1, ""), trial("c2", 0, "0af7651916cd43dd8448eb211c80319c"), more[1]})
	})

	t.Run("GetUnknownIsErrExperimentNotFound", func(t *testing.T) {
		_, _, err := es.GetExperiment(ctx, "no-such-experiment")
		if !errors.Is(err, store.ErrExperimentNotFound) {
			t.Fatalf("GetExperiment(unknown) = %v, want ErrExperimentNotFound", err)
		}
	})

	t.Run("BadDocumentsStoreNothing", func(t *testing.T) {
		good := exp("exp-bad", base, "", "d1", "running")
		cases := map[string]func() (store.StoredExperiment, []store.StoredTrial){
			"no id": func() (store.StoredExperiment, []store.StoredTrial) { e := good; e.ID = ""; return e, nil },
			"record array": func() (store.StoredExperiment, []store.StoredTrial) {
				e := good
				e.Record = json.RawMessage(`[1]`)
				return e, nil
			},
			"no created": func() (store.StoredExperiment, []store.StoredTrial) {
				e := good
				e.Created = time.Time{}
				return e, nil
			},
			"trial not JSON": func() (store.StoredExperiment, []store.StoredTrial) {
				return good, []store.StoredTrial{{CaseID: "c", Doc: json.RawMessage(`{`)}}
			},
			"trial twice": func() (store.StoredExperiment, []store.StoredTrial) {
				return good, []store.StoredTrial{trial("c", 0, ""), trial("c", 0, "")}
			},
		}
		for name, mk := range cases {
			e, tr := mk()
			if err := es.PutExperiment(ctx, e, tr); !errors.Is(err, store.ErrBadExperiment) {
				t.Errorf("%s: PutExperiment = %v, want ErrBadExperiment", name, err)
			}
		}
		if _, _, err := es.GetExperiment(ctx, "exp-bad"); !errors.Is(err, store.ErrExperimentNotFound) {
			t.Errorf("after refused puts, GetExperiment = %v, want ErrExperimentNotFound", err)
		}
	})

	t.Run("ListNewestFirstFiltersAndPages", func(t *testing.T) {
		// exp-a (base) is stored; add 6 more, two sharing a created time.
		want := []store.StoredExperiment{exp("exp-a", base, "v1", "d1", "complete")}
		for i, id := range []string{"exp-b", "exp-c", "exp-d", "exp-e", "exp-f", "exp-g"} {
			created := base.Add(time.Duration(i/2+1) * time.Hour)
			label := []string{"v1", "v2"}[i%2]
			e := exp(id, created, label, "d2", "complete")
			if err := es.PutExperiment(ctx, e, []store.StoredTrial{trial("c1", 0, "")}); err != nil {
				t.Fatalf("PutExperiment %s: %v", id, err)
			}
			want = append(want, e)
		}
		order := []string{"exp-g", "exp-f", "exp-e", "exp-d", "exp-c", "exp-b", "exp-a"} // newest first, ties by id descending
		var got []string
		tok := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("more than 10 pages of 2")
			}
			p, err := es.ListExperiments(ctx, store.ExperimentQuery{Limit: 2, PageToken: tok})
			if err != nil {
				t.Fatalf("ListExperiments: %v", err)
			}
			for _, e := range p.Experiments {
				got = append(got, e.ID)
				if len(e.Dataset) != 0 {
					t.Errorf("list returned %s with its dataset document; the list leaves it out", e.ID)
				}
				for _, w := range want {
					if w.ID == e.ID {
						checkExperiment(t, e, w, false)
					}
				}
			}
			if tok = p.NextPageToken; tok == "" {
				break
			}
		}
		if !reflect.DeepEqual(got, order) {
			t.Errorf("pages of 2 list %v, want %v", got, order)
		}
		ids := func(q store.ExperimentQuery) []string {
			p, err := es.ListExperiments(ctx, q)
			if err != nil {
				t.Fatalf("ListExperiments(%+v): %v", q, err)
			}
			var out []string
			for _, e := range p.Experiments {
				out = append(out, e.ID)
			}
			return out
		}
		if got, want := ids(store.ExperimentQuery{Label: "v2"}), []string{"exp-g", "exp-e", "exp-c"}; !reflect.DeepEqual(got, want) {
			t.Errorf("label v2 lists %v, want %v", got, want)
		}
		if got, want := ids(store.ExperimentQuery{DatasetSHA256: "d1"}), []string{"exp-a"}; !reflect.DeepEqual(got, want) {
			t.Errorf("dataset d1 lists %v, want %v", got, want)
		}
		if _, err := es.ListExperiments(ctx, store.ExperimentQuery{PageToken: "not a token"}); !errors.Is(err, store.ErrBadExperimentQuery) {
			t.Errorf("bad page token: %v, want ErrBadExperimentQuery", err)
		}
	})

	t.Run("ProjectsSeeOnlyTheirOwn", func(t *testing.T) {
		alpha, beta := store.WithProject(ctx, "alpha"), store.WithProject(ctx, "beta")
		ea := exp("exp-a", base.Add(time.Minute), "alpha-label", "d9", "complete") // same id as the default project's
		if err := es.PutExperiment(alpha, ea, []store.StoredTrial{trial("only-alpha", 0, "")}); err != nil {
			t.Fatalf("PutExperiment(alpha): %v", err)
		}
		got, trials := s.getExperiment(t, es, alpha, "exp-a")
		checkExperiment(t, got, ea, true)
		checkTrials(t, trials, []store.StoredTrial{trial("only-alpha", 0, "")})
		def, _ := s.getExperiment(t, es, ctx, "exp-a")
		if def.Label != "v1" {
			t.Errorf("the default project's exp-a has label %q after alpha put its own exp-a; want v1", def.Label)
		}
		if _, _, err := es.GetExperiment(beta, "exp-a"); !errors.Is(err, store.ErrExperimentNotFound) {
			t.Errorf("beta reads alpha's experiment: %v", err)
		}
		p, err := es.ListExperiments(beta, store.ExperimentQuery{})
		if err != nil || len(p.Experiments) != 0 {
			t.Errorf("beta lists %d experiments (err %v), want none", len(p.Experiments), err)
		}
		p, err = es.ListExperiments(alpha, store.ExperimentQuery{})
		if err != nil || len(p.Experiments) != 1 || p.Experiments[0].Label != "alpha-label" {
			t.Errorf("alpha lists %+v (err %v), want its one experiment", p.Experiments, err)
		}
	})

	if s.h.Reopen != nil {
		t.Run("ReopenKeepsThem", func(t *testing.T) {
			if err := st.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			es2, ok := s.track(t, s.h.Reopen(t)).(store.ExperimentStore)
			if !ok {
				t.Fatal("the reopened store does not keep experiments")
			}
			got, trials := s.getExperiment(t, es2, ctx, "exp-a")
			checkExperiment(t, got, exp("exp-a", base, "v1", "d1", "complete"), true)
			if len(trials) != 4 {
				t.Errorf("after reopen exp-a has %d trials, want 4", len(trials))
			}
		})
	}
}

func (s *suite) getExperiment(t *testing.T, es store.ExperimentReader, ctx context.Context, id string) (store.StoredExperiment, []store.StoredTrial) {
	t.Helper()
	var e store.StoredExperiment
	var trials []store.StoredTrial
	s.eventually(t, "GetExperiment "+id, func() string {
		var err error
		if e, trials, err = es.GetExperiment(ctx, id); err != nil {
			return err.Error()
		}
		return ""
	})
	return e, trials
}

func checkExperiment(t *testing.T, got, want store.StoredExperiment, withDataset bool) {
	t.Helper()
	if got.ID != want.ID || got.Name != want.Name || !got.Created.Equal(want.Created) || got.Label != want.Label ||
		got.DatasetSHA256 != want.DatasetSHA256 || got.Status != want.Status {
		t.Errorf("experiment %s indexed fields = {%q %q %v %q %q %q}, want {%q %q %v %q %q %q}", want.ID,
			got.ID, got.Name, got.Created, got.Label, got.DatasetSHA256, got.Status,
			want.ID, want.Name, want.Created, want.Label, want.DatasetSHA256, want.Status)
	}
	if !sameJSON(got.Record, want.Record) {
		t.Errorf("experiment %s record = %s, want %s", want.ID, got.Record, want.Record)
	}
	if withDataset && !sameJSON(got.Dataset, want.Dataset) {
		t.Errorf("experiment %s dataset = %s, want %s", want.ID, got.Dataset, want.Dataset)
	}
	if got.Updated.IsZero() {
		t.Errorf("experiment %s: Updated is not set", want.ID)
	}
}

func checkTrials(t *testing.T, got, want []store.StoredTrial) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d trials, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.CaseID != w.CaseID || g.Trial != w.Trial || g.TraceID != w.TraceID || !sameJSON(g.Doc, w.Doc) {
			t.Errorf("trial %d = {%s %d %s %s}, want {%s %d %s %s}", i, g.CaseID, g.Trial, g.TraceID, g.Doc, w.CaseID, w.Trial, w.TraceID, w.Doc)
		}
	}
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
