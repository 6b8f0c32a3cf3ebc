package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/store"
)

// Experiments (`loom-eval experiment run`) kept in the trace store: the
// list reads them through the store's store.ExperimentReader; the compare
// page asks an ExperimentComparer, which cmd wires to baselines/experiment's
// Compare (the path `experiment compare` takes), so the page and the
// command say the same thing. The UI scores nothing itself.

// ExperimentComparer compares stored experiments: ids[0] is the baseline,
// ids[1] is gated against it, further ids are compared with ids[0]. Reads
// are scoped to the context's project. An unknown id's error wraps
// store.ErrExperimentNotFound.
type ExperimentComparer interface {
	CompareExperiments(ctx context.Context, ids []string) (*ExperimentComparison, error)
}

// ExperimentComparison is experiments side by side, case by case (the
// /api/v1/experiments/compare answer).
type ExperimentComparison struct {
	Experiments []*datasets.Experiment `json:"experiments"`
	Cases       []ExperimentCaseRow    `json:"cases"`
	// Comparison and Gate are the second experiment against the first:
	// the pass-rate delta, its MDE, the per-case verdicts, the decision.
	Comparison      *scorer.Comparison `json:"comparison"`
	Gate            *gate.Result       `json:"gate"`
	DatasetWarnings []string           `json:"dataset_warnings,omitempty"`
}

// ExperimentCaseRow is one case: Sides[i] is experiment i's trials of it,
// Changes[i] its change against the first ("" for the first).
type ExperimentCaseRow struct {
	CaseID  string               `json:"case_id"`
	Changes []string             `json:"changes"`
	Sides   []ExperimentCaseSide `json:"sides"`
}

// ExperimentCaseSide is one experiment's trials of a case (the fields of
// `experiment compare --json`'s a and b).
type ExperimentCaseSide struct {
	Passes         int      `json:"passes"`
	Trials         int      `json:"trials"`
	Score          float64  `json:"score"`
	MeanCostUSD    *float64 `json:"mean_cost_usd"`
	MeanDurationMS *float64 `json:"mean_duration_ms"`
	TraceIDs       []string `json:"trace_ids"`
	Answer         string   `json:"answer"`
}

// ExperimentItem is one row of the experiment list.
type ExperimentItem struct {
	*datasets.Experiment
	// PassRate is Summary.Passed / Summary.Recorded with its 95% Wilson
	// interval [PassLow, PassHigh] (nil before any trial is recorded).
	PassRate *float64 `json:"pass_rate"`
	PassLow  *float64 `json:"pass_rate_low"`
	PassHigh *float64 `json:"pass_rate_high"`
	// DatasetVersion is the dataset version whose cases.jsonl has the
	// experiment's dataset digest (nil when the datasets folder has none).
	DatasetVersion *datasets.Version `json:"dataset_version,omitempty"`
}

// ExperimentListView is the /experiments page.
type ExperimentListView struct {
	Supported   bool // the store keeps experiments
	Experiments []ExperimentItem
	NextPage    string
	Query       url.Values
	Errors      []string // records that did not decode
}

// ExperimentCompareView is the /experiments/compare page.
type ExperimentCompareView struct {
	*ExperimentComparison
	IDs []string
}

// MaxCompared bounds how many experiments one compare page shows.
const MaxCompared = 6

func (s *Server) registerExperiments() {
	s.mux.HandleFunc("GET /experiments", s.experimentList)
	s.mux.HandleFunc("GET /experiments/compare", s.experimentCompare)
	s.mux.HandleFunc("GET /api/v1/experiments", s.apiExperimentList)
	s.mux.HandleFunc("GET /api/v1/experiments/compare", s.apiExperimentCompare)
}

// listExperiments reads one page of the store's experiments.
func (s *Server) listExperiments(ctx context.Context, q url.Values) (ExperimentListView, error) {
	v := ExperimentListView{Query: q}
	r, ok := s.deps.Traces.(store.ExperimentReader)
	if !ok {
		return v, nil
	}
	v.Supported = true
	page, err := r.ListExperiments(ctx, store.ExperimentQuery{Label: q.Get("label"), DatasetSHA256: q.Get("dataset"), PageToken: q.Get("page_token")})
	if err != nil {
		if errors.Is(err, store.ErrBadExperimentQuery) {
			return v, badRequest{err.Error()}
		}
		return v, err
	}
	v.NextPage = page.NextPageToken
	for _, se := range page.Experiments {
		e, _, _, err := datasets.ExperimentFromStore(se, nil)
		if err != nil {
			v.Errors = append(v.Errors, err.Error())
			continue
		}
		v.Experiments = append(v.Experiments, newExperimentItem(e))
	}
	s.nameDatasetVersions(v.Experiments)
	return v, nil
}

func newExperimentItem(e *datasets.Experiment) ExperimentItem {
	it := ExperimentItem{Experiment: e}
	if n := e.Summary.Recorded; n > 0 {
		p := float64(e.Summary.Passed) / float64(n)
		lo, hi := wilson(e.Summary.Passed, n)
		it.PassRate, it.PassLow, it.PassHigh = &p, &lo, &hi
	}
	return it
}

// wilson is the 95% Wilson score interval of k successes in n trials.
func wilson(k, n int) (float64, float64) {
	const z = 1.959963984540054
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return math.Max(0, mid-half), math.Min(1, mid+half)
}

func (s *Server) experimentList(w http.ResponseWriter, r *http.Request) {
	v, err := s.listExperiments(r.Context(), r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, ExperimentListPage(v))
}

func (s *Server) apiExperimentList(w http.ResponseWriter, r *http.Request) {
	v, err := s.listExperiments(r.Context(), r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !v.Supported {
		s.fail(w, r, errNoExperiments)
		return
	}
	items := v.Experiments
	if items == nil {
		items = []ExperimentItem{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"experiments": items, "next_page_token": v.NextPage, "errors": v.Errors})
}

var errNoExperiments = errors.New("this trace store keeps no experiments")

// compareIDs reads ids=A,B[,C] (or ids repeated, as a form sends them).
// The list's form (from=list) sends its ticked rows newest first: they are
// reversed, so the oldest ticked is the baseline.
func compareIDs(q url.Values) ([]string, error) {
	var ids []string
	for _, v := range q["ids"] {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	if q.Get("from") == "list" {
		slices.Reverse(ids)
	}
	if len(ids) < 2 || len(ids) > MaxCompared {
		return nil, badRequest{fmt.Sprintf("ids: want 2 to %d experiment ids, the baseline first (ids=A,B), got %d", MaxCompared, len(ids))}
	}
	return ids, nil
}

func (s *Server) compareExperiments(r *http.Request) (*ExperimentComparison, []string, error) {
	ids, err := compareIDs(r.URL.Query())
	if err != nil {
		return nil, nil, err
	}
	if s.deps.Experiments == nil {
		return nil, ids, errors.New("this server cannot compare experiments (no comparer is configured)")
	}
	c, err := s.deps.Experiments.CompareExperiments(r.Context(), ids)
	return c, ids, err
}

func (s *Server) experimentCompare(w http.ResponseWriter, r *http.Request) {
	c, ids, err := s.compareExperiments(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, ExperimentComparePage(ExperimentCompareView{ExperimentComparison: c, IDs: ids}))
}

func (s *Server) apiExperimentCompare(w http.ResponseWriter, r *http.Request) {
	c, _, err := s.compareExperiments(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// Helpers for the templates.

func experimentCompareURL(ids ...string) string {
	return "/experiments/compare?ids=" + url.QueryEscape(strings.Join(ids, ","))
}

func fmtPassRate(it ExperimentItem) string {
	if it.PassRate == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f%% [%.0f–%.0f%%]", *it.PassRate*100, *it.PassLow*100, *it.PassHigh*100)
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// gateVerdict is the list's gate column: the verdict against the baseline
// the run was gated against.
func gateVerdict(e *datasets.Experiment) (string, string) {
	switch {
	case e.Against == nil:
		return "—", ""
	case e.Against.GatePassed == nil:
		return "not gated", ""
	case *e.Against.GatePassed:
		return "PASS", "pass"
	}
	return "FAIL", "fail"
}

func labelOf(e *datasets.Experiment) string {
	l := e.Agent.Label
	if l == "" {
		l = "—"
	}
	if c := e.Agent.GitCommit; c != "" {
		if len(c) > 8 {
			c = c[:8]
		}
		l += " @" + c
		if e.Agent.GitDirty {
			l += "+dirty"
		}
	}
	return l
}

func experimentTitle(e *datasets.Experiment) string {
	if e.Name != "" {
		return e.Name
	}
	return e.ID
}

// answerPreview clips an answer for the table; the full one expands.
func answerPreview(a string) (string, bool) {
	const max = 80
	a = strings.TrimSpace(a)
	if r := []rune(a); len(r) > max {
		return string(r[:max]) + "…", true
	}
	return a, false
}

func fmtScore(f float64) string { return fmt.Sprintf("%.3f", f) }

func fmtMeanMS(v *float64) string {
	if v == nil {
		return "?"
	}
	return fmtMS(*v)
}

func passesText(c ExperimentCaseSide) string { return fmt.Sprintf("%d/%d", c.Passes, c.Trials) }

// mdeText says what the comparison can detect.
func expMDEText(c *scorer.Comparison) string {
	if c == nil || c.PassRateMDE == nil || *c.PassRateMDE > 1 {
		return "none (too few cases)"
	}
	return fmt.Sprintf("%.3f", *c.PassRateMDE)
}

func deltaText(c *scorer.Comparison) string {
	if c == nil || c.PassRateDelta == nil {
		return "—"
	}
	d := c.PassRateDelta
	return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", d.Estimate, d.Lower, d.Upper)
}

// changeClass marks a side's cell by its change against the baseline
// (descriptive: a case passed when all its trials did).
func changeClass(ch string) string {
	switch ch {
	case scorer.ChangeRegressed:
		return "regressed"
	case scorer.ChangeFixed:
		return "improved"
	}
	return ""
}

// gateRegressed says whether the gate's comparison (the second experiment
// against the first) found the case regressed by the evidence.
func gateRegressed(c *scorer.Comparison, caseID string) bool {
	if c == nil {
		return false
	}
	for _, id := range c.Regressed {
		if id == caseID {
			return true
		}
	}
	return false
}

func traceLinkText(i int) string { return fmt.Sprintf("t%d", i) }

func joinComma(ids []string) string { return strings.Join(ids, ", ") }

func joinSpace(ids []string) string { return strings.Join(ids, " ") }

func boolAttr(b bool) string { return fmt.Sprint(b) }

// experimentPageURL is the list's next page, with its filters.
func experimentPageURL(q url.Values, token string) string {
	v := url.Values{}
	for _, k := range []string{"label", "dataset"} {
		if x := q.Get(k); x != "" {
			v.Set(k, x)
		}
	}
	v.Set("page_token", token)
	return "/experiments?" + v.Encode()
}

// nameDatasetVersions sets each item's DatasetVersion from the datasets
// folder, by digest.
func (s *Server) nameDatasetVersions(items []ExperimentItem) {
	if s.deps.Datasets == "" || len(items) == 0 {
		return
	}
	reg := datasets.Registry{Dir: s.deps.Datasets}
	byDigest := map[string]*datasets.Version{}
	names, err := reg.Names()
	if err != nil {
		return
	}
	for _, n := range names {
		vs, err := reg.Versions(n)
		if err != nil {
			continue
		}
		for i := range vs {
			byDigest[vs[i].SHA256] = &vs[i]
		}
	}
	for i := range items {
		items[i].DatasetVersion = byDigest[items[i].Dataset.SHA256]
	}
}
