// Package memablate measures what memory between runs is worth to the
// research agent: a multi-run task set built from a judged dataset, where
// later tasks ask about the same documentation page as earlier ones, is run
// with memory off, on, and on but stale (every record decayed before it
// could be recalled). Every run is the scripted research policy (labelled
// scripted), journaled in SQLite, assembled by tiers; memory is the
// agents/memory store, written by distilling each finished run's journal.
package memablate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/memory"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/retrieval/judged"
	"github.com/loomwork/loomwork/scorer/stats"
)

// Config configures the ablation.
type Config struct {
	// Dataset is a judged dataset folder (docs/, issues.jsonl, qrels.jsonl).
	Dataset string
	// Name names the dataset in the report (default the folder's name).
	Name string
	// IndexCache holds the persisted BM25 index ("" : a temporary one).
	IndexCache string
	// Workdir receives the journals and memory stores, one per arm.
	Workdir string
	// Start is the clock of the first task; each task runs one hour after
	// the previous one. Injected: the result does not depend on when the
	// command runs.
	Start time.Time
	// HalfLife is the memory's decay half-life (default 30 days).
	HalfLife time.Duration
	// StaleAfter is how long after the writes the stale arm recalls
	// (default 120 days: four half-lives).
	StaleAfter time.Duration
	// Recall configures recall (research.RecallConfig defaults).
	Recall research.RecallConfig
	// Limit runs only the first Limit tasks (0: all).
	Limit int
	// Progress, when set, receives a line when the ablation starts and as
	// each arm starts and ends ("memory-ablate: ARM (N/5)…").
	Progress io.Writer
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	if c.Dataset == "" {
		errs = append(errs, errors.New("dataset must be set"))
	}
	if c.Workdir == "" {
		errs = append(errs, errors.New("workdir must be set"))
	}
	if c.HalfLife < 0 || c.StaleAfter < 0 {
		errs = append(errs, errors.New("half_life and stale_after must not be negative"))
	}
	return errors.Join(errs...)
}

// Task is one question of the task set.
type Task struct {
	ID    string `json:"id"`
	Issue int    `json:"issue"`
	Text  string `json:"-"`
	Title string `json:"title"`
	Page  string `json:"page"` // the group: the judged page the questions share
	// Judged are the pages judged relevant to the question (gold and
	// silver); citing one is success.
	Judged []string `json:"judged"`
	// FollowUp is true for every task after the first of its page.
	FollowUp bool `json:"follow_up"`
}

// TaskSet builds the task set: the judged questions (gold and silver)
// grouped by their best-judged page (highest grade, then name), groups of
// at least two, in issue order (the order the questions were asked).
func TaskSet(ds *judged.Dataset) []Task {
	byPage := map[string][]judged.Query{}
	for _, q := range ds.Queries {
		pages := q.Relevant("")
		if len(pages) == 0 {
			continue
		}
		best := ""
		for p, g := range pages {
			if best == "" || g > pages[best] || g == pages[best] && p < best {
				best = p
			}
		}
		byPage[best] = append(byPage[best], q)
	}
	var out []Task
	for page, qs := range byPage {
		if len(qs) < 2 {
			continue
		}
		sort.Slice(qs, func(i, j int) bool { return qs[i].Issue < qs[j].Issue })
		for i, q := range qs {
			var rel []string
			for p := range q.Relevant("") {
				rel = append(rel, p)
			}
			sort.Strings(rel)
			out = append(out, Task{ID: q.ID, Issue: q.Issue, Text: q.Text, Title: research.RecallQuery(q.Text), Page: page, Judged: rel, FollowUp: i > 0})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Issue < out[j].Issue })
	return out
}

// StrictScore is the recall threshold of the strict arm: with a fresh
// episode (salience 0.7) it needs half the title's content words in common.
const StrictScore = 0.35

// Arm names.
const (
	ArmOff   = "memory off"
	ArmOn    = "memory on (verify)"
	ArmTrust = "memory on (trust)"
	// ArmTrustStrict trusts only records scoring at least StrictScore.
	ArmTrustStrict = "memory on (trust, strict recall)"
	ArmStale       = "memory on (verify), stale"
)

// armMode is how an arm's scripted policy uses recalled memory.
func armMode(arm string) string {
	if arm == ArmTrust || arm == ArmTrustStrict {
		return research.RecallTrust
	}
	return research.RecallVerify
}

// RunResult is one task in one arm.
type RunResult struct {
	Task      string   `json:"task"`
	FollowUp  bool     `json:"follow_up"`
	RunID     string   `json:"run_id"`
	Recalled  []string `json:"recalled,omitempty"` // memory keys that entered the memory tier
	Citations []string `json:"citations"`
	Success   bool     `json:"success"` // a judged page cited
	Tokens    int64    `json:"tokens"`  // input + output, all model calls
	Steps     int      `json:"steps"`
	Label     string   `json:"label"`
}

// Rate is k of n with its Wilson 95% interval.
type Rate struct {
	K  int     `json:"k"`
	N  int     `json:"n"`
	P  float64 `json:"p"`
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// Wilson returns k/n with the Wilson score interval at 95%.
func Wilson(k, n int) Rate {
	if n == 0 {
		return Rate{}
	}
	lo, hi := stats.Wilson(k, n, 0.95)
	return Rate{K: k, N: n, P: float64(k) / float64(n), Lo: lo, Hi: hi}
}

func (r Rate) String() string {
	if r.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%% [%.0f–%.0f] (%d/%d)", 100*r.P, 100*r.Lo, 100*r.Hi, r.K, r.N)
}

// Arm is one arm's results.
type Arm struct {
	Name            string      `json:"name"`
	Runs            []RunResult `json:"runs"`
	Success         Rate        `json:"success"`
	FollowUpSuccess Rate        `json:"follow_up_success"`
	Tokens          int64       `json:"tokens"`
	FollowUpTokens  int64       `json:"follow_up_tokens"`
	Recalls         int         `json:"recalls"` // runs with at least one record recalled
	Written         int         `json:"written"` // records in the store at the end
}

// Report is the whole ablation.
type Report struct {
	Dataset string `json:"dataset"`
	Tasks   []Task `json:"tasks"`
	Pages   int    `json:"pages"`
	Arms    []Arm  `json:"arms"`
	// Excerpt is one tier-built model_request of the memory-on arm, as
	// journaled (the first follow-up request whose memory tier is filled).
	Excerpt json.RawMessage `json:"excerpt,omitempty"`
	// Stale shows one record's salience when written and when the stale
	// arm recalled.
	Stale *StaleRecord `json:"stale,omitempty"`
}

// StaleRecord is the decay of one record.
type StaleRecord struct {
	Key         string  `json:"key"`
	Text        string  `json:"text"`
	Salience    float64 `json:"salience"`
	Age         string  `json:"age"`
	Decayed     float64 `json:"decayed"`
	MinSalience float64 `json:"min_salience"`
	Forgotten   bool    `json:"forgotten"`
}

// Run runs the three arms.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("memory ablation: %w", err)
	}
	if cfg.HalfLife == 0 {
		cfg.HalfLife = 30 * 24 * time.Hour
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = 4 * cfg.HalfLife
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	ds, err := judged.Load(cfg.Dataset, "")
	if err != nil {
		return nil, fmt.Errorf("memory ablation: %w", err)
	}
	tasks := TaskSet(ds)
	if cfg.Limit > 0 && len(tasks) > cfg.Limit {
		tasks = tasks[:cfg.Limit]
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("memory ablation: %s has no page asked about twice", cfg.Dataset)
	}
	pages := map[string]bool{}
	for _, t := range tasks {
		pages[t.Page] = true
	}
	tok, err := contextlayer.NewTokenizer()
	if err != nil {
		return nil, err
	}
	idx := &research.DatasetIndex{Dir: cfg.Dataset, CacheDir: cfg.IndexCache}
	defer idx.Close(ctx) //nolint:errcheck // the report is complete
	agent, err := research.New(research.Config{Index: idx})
	if err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(cfg.Dataset))
	}
	rep := &Report{Dataset: name, Tasks: tasks, Pages: len(pages)}
	arms := []string{ArmOff, ArmOn, ArmTrust, ArmTrustStrict, ArmStale}
	say := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "memory-ablate: "+format+"\n", args...)
		}
	}
	say("%d tasks on %d pages (%s), %d arms; the research index loads on the first search", len(tasks), len(pages), name, len(arms))
	for i, arm := range arms {
		say("%s (%d/%d)…", arm, i+1, len(arms))
		began := time.Now()
		a, err := runArm(ctx, cfg, arm, agent, tok, tasks, rep)
		if err != nil {
			return nil, fmt.Errorf("memory ablation: %s: %w", arm, err)
		}
		say("  %s: success %s, follow-up success %s (%.1f s)", arm, a.Success, a.FollowUpSuccess, time.Since(began).Seconds())
		rep.Arms = append(rep.Arms, a)
	}
	return rep, nil
}

func slug(s string) string {
	return strings.NewReplacer(" ", "-", ",", "", "(", "", ")", "").Replace(s)
}

func runArm(ctx context.Context, cfg Config, arm string, agent runtime.Agent, tok contextlayer.Counter, tasks []Task, rep *Report) (Arm, error) {
	dir := filepath.Join(cfg.Workdir, slug(arm))
	jpath := filepath.Join(dir, "runs.journal.db")
	mpath := filepath.Join(dir, "memory.db")
	for _, p := range []string{jpath, jpath + "-wal", jpath + "-shm", mpath, mpath + "-wal", mpath + "-shm"} {
		if err := removeIfExists(p); err != nil {
			return Arm{}, err
		}
	}
	if err := mkdirAll(dir); err != nil {
		return Arm{}, err
	}
	i := 0
	clock := func() time.Time { i++; return cfg.Start.Add(time.Duration(i) * time.Millisecond) }
	j, err := journaldb.Open(ctx, journaldb.Config{Path: jpath, Clock: clock})
	if err != nil {
		return Arm{}, err
	}
	defer j.Shutdown(ctx) //nolint:errcheck // every append is committed
	st, err := memory.Open(ctx, memory.Config{Path: mpath, HalfLife: cfg.HalfLife})
	if err != nil {
		return Arm{}, err
	}
	defer st.Shutdown(ctx) //nolint:errcheck // every write is committed
	scope := memory.Scope{Tenant: "ablation", Agent: research.Name, Namespace: rep.Dataset}
	a := Arm{Name: arm}
	for n, t := range tasks {
		writeAt := cfg.Start.Add(time.Duration(n) * time.Hour)
		recallAt := writeAt
		if arm == ArmStale {
			recallAt = writeAt.Add(cfg.StaleAfter)
			// What the store does at that time: forget what decayed.
			if _, err := st.Forget(ctx, scope, recallAt); err != nil {
				return Arm{}, err
			}
		}
		var recalled []runtime.TierDoc
		var keys []string
		if arm != ArmOff {
			rc := cfg.Recall
			if arm == ArmTrustStrict {
				rc.MinScore = StrictScore
			}
			docs, scored, err := research.Recall(ctx, st, scope, t.Text, rc, recallAt)
			if err != nil {
				return Arm{}, err
			}
			recalled = docs
			for _, s := range scored {
				keys = append(keys, s.Record.Key)
			}
		}
		spec := research.RecallContext(research.DefaultContext(), recalled, cfg.Recall)
		rt, err := runtime.New(runtime.Config{Model: research.Policy(research.PolicyConfig{Counter: tok, Recall: armMode(arm)}), Journal: j,
			Clock: clock, MaxSteps: 8, Context: &spec})
		if err != nil {
			return Arm{}, err
		}
		runID := fmt.Sprintf("%s-%s", slug(arm), t.ID)
		res, err := rt.Run(ctx, agent, runtime.Task{RunID: runID, Input: t.Text, Attributes: research.TaskAttributes(t.Issue), CaseID: t.ID})
		if err != nil {
			return Arm{}, fmt.Errorf("task %s: %w", t.ID, err)
		}
		r := RunResult{Task: t.ID, FollowUp: t.FollowUp, RunID: runID, Recalled: keys, Citations: res.Citations,
			Tokens: res.Usage.InputTokens + res.Usage.OutputTokens, Steps: res.Steps, Label: res.Label}
		for _, c := range res.Citations {
			if slices.Contains(t.Judged, c) {
				r.Success = true
			}
		}
		a.Runs = append(a.Runs, r)
		if len(keys) > 0 {
			a.Recalls++
		}
		if arm == ArmOff {
			continue
		}
		evs, err := j.Events(ctx, runID)
		if err != nil {
			return Arm{}, err
		}
		run := journal.Run{ID: runID, Events: evs}
		if arm == ArmOn && rep.Excerpt == nil && t.FollowUp && len(keys) > 0 {
			rep.Excerpt = excerpt(run)
		}
		if _, err := st.DistillRun(ctx, scope, run, writeAt); err != nil {
			return Arm{}, err
		}
		if arm == ArmStale && rep.Stale == nil && n > 0 {
			recs, err := st.Records(ctx, scope)
			if err != nil {
				return Arm{}, err
			}
			if len(recs) > 0 {
				r0 := recs[0]
				d := memory.Decayed(r0.Salience, r0.Written, r0.Written.Add(cfg.StaleAfter), cfg.HalfLife)
				rep.Stale = &StaleRecord{Key: r0.Key, Text: r0.Text, Salience: r0.Salience, Age: fmt.Sprintf("%.0f days", cfg.StaleAfter.Hours()/24),
					Decayed: d, MinSalience: st.Config().MinSalience, Forgotten: d < st.Config().MinSalience}
			}
		}
	}
	var k, kf, nf int
	for _, r := range a.Runs {
		a.Tokens += r.Tokens
		if r.Success {
			k++
		}
		if r.FollowUp {
			nf++
			a.FollowUpTokens += r.Tokens
			if r.Success {
				kf++
			}
		}
	}
	a.Success, a.FollowUpSuccess = Wilson(k, len(a.Runs)), Wilson(kf, nf)
	recs, err := st.Records(ctx, scope)
	if err != nil {
		return Arm{}, err
	}
	a.Written = len(recs)
	return a, nil
}

// excerpt is the last model_request of run (the one with the most tier
// items: task, memory, tool results, history), as journaled, its new
// messages elided for the doc.
func excerpt(run journal.Run) json.RawMessage {
	for i := len(run.Events) - 1; i >= 0; i-- {
		e := run.Events[i]
		if e.Kind != journal.KindModelRequest {
			continue
		}
		var p journal.ModelRequest
		if json.Unmarshal(e.Payload, &p) != nil || p.Context == nil || p.Context.Tiers == nil {
			continue
		}
		out := map[string]any{"run_id": e.RunID, "seq": e.Seq, "kind": e.Kind, "step": e.Step, "label": e.Label,
			"payload": map[string]any{"model": p.Model, "message_count": p.MessageCount, "tools": p.Tools,
				"new_messages": fmt.Sprintf("(%d messages, elided here)", len(p.NewMessages)),
				"context": map[string]any{"strategy": p.Context.Strategy, "budget": p.Context.Budget,
					"tokens_before": p.Context.TokensBefore, "tokens_after": p.Context.TokensAfter, "tiers": p.Context.Tiers}}}
		b, _ := json.MarshalIndent(out, "", "  ")
		return b
	}
	return nil
}

// WriteMarkdown renders the report as the section of docs/context.md.
func WriteMarkdown(w io.Writer, rep *Report, command string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Tiers and memory between runs\n\nGenerated by `%s`; do not edit by hand.\n\n", command)
	if err := writeReference(&b); err != nil {
		return err
	}
	b.WriteString("### Memory between runs: an ablation\n\n")
	nf := 0
	for _, t := range rep.Tasks {
		if t.FollowUp {
			nf++
		}
	}
	fmt.Fprintf(&b, "The task set is built from the shipped judged data (`%s`, `qrels.jsonl`): the %d judged questions (gold or silver) whose best-judged page was the best-judged page of at least one other question, %d pages in all, run in issue order (the order they were asked). %d of them are follow-ups: a later question about a page an earlier one was about. Every run is the research agent with its **scripted** policy (model label `scripted`), each request assembled by tiers (window 10,000, 2,000 reserved), the question's own issue excluded from retrieval. Success is graded against the judgements: the answer cites a page judged relevant to the question (gold, grade 2, or silver, grade 1) — the `judged_page_cited` rule with silver judgements counted. Tokens are input + output over all model calls, counted with o200k_base (the scripted policy reports the request it received).\n\n", rep.Dataset, len(rep.Tasks), rep.Pages, nf)
	b.WriteString("- **memory off**: no memory tier.\n")
	b.WriteString("- **memory on (verify)**: before each run the store is searched with the question's title less function words (score ≥ 0.1, at most 2 records); recalled records enter the memory tier with their provenance; after each run its journal is distilled (`memory.FromJournal`, `memory.Distill`) and written through the write policy. The scripted policy searches as usual and reads first the hits a recalled answer cites: memory reorders what retrieval found and never adds a page.\n")
	b.WriteString("- **memory on (trust)**: the same store, but the policy reads the pages a recalled answer cites instead of searching.\n")
	fmt.Fprintf(&b, "- **memory on (trust, strict recall)**: trust, but only records scoring ≥ %.2f are recalled.\n", StrictScore)
	fmt.Fprintf(&b, "- **memory on (verify), stale**: verify, but each run recalls %s after the earlier runs wrote: every record has decayed below the threshold and is forgotten first.\n\n", staleAge(rep))
	b.WriteString("| arm | success, all tasks | success, follow-ups | tokens, all | tokens, follow-ups | runs with a recall | records at end |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, a := range rep.Arms {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d |\n", a.Name, a.Success, a.FollowUpSuccess, a.Tokens, a.FollowUpTokens, a.Recalls, a.Written)
	}
	b.WriteString("\nIntervals are Wilson 95%. Per task, against memory off:\n\n")
	if len(rep.Arms) > 1 {
		off := rep.Arms[0]
		for _, a := range rep.Arms[1:] {
			var helped, hurt []string
			for i := range a.Runs {
				if a.Runs[i].Success && !off.Runs[i].Success {
					helped = append(helped, a.Runs[i].Task)
				}
				if !a.Runs[i].Success && off.Runs[i].Success {
					hurt = append(hurt, a.Runs[i].Task)
				}
			}
			fmt.Fprintf(&b, "- %s: %d failure(s) became successes (%s), %d success(es) became failures (%s); tokens %+.0f%%.\n",
				a.Name, len(helped), listOr(helped), len(hurt), listOr(hurt), 100*(float64(a.Tokens)/float64(off.Tokens)-1))
		}
		b.WriteString("\n")
	}
	if s := rep.Stale; s != nil {
		fmt.Fprintf(&b, "The stale case, one record: `%s` (%q) was written with salience %.2f; %s later it is worth %.3f, below the %.2f threshold, so it is forgotten before the next run can recall it — the stale arm behaves exactly as memory off.\n\n", s.Key, s.Text, s.Salience, s.Age, s.Decayed, s.MinSalience)
	}
	if len(rep.Excerpt) > 0 {
		b.WriteString("### A tier-built request, as journaled\n\nThe last request of the first follow-up run of the memory-on (verify) arm that recalled a record: its `model_request` event with the context record (new messages elided). Tool results are `tool:CALL-ID`, other turns `msg:N`; evidence and memory carry their provenance. Every item has a decision, a size and a reason; `used + dropped = offered`; utilization is against the whole window; `weakest_id` is the admitted item in the U-curve's weakest slot.\n\n```json\n")
		b.Write(rep.Excerpt)
		b.WriteString("\n```\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeReference renders the tier builder on the reference design's
// example, computed now by contextlayer.Builder.
func writeReference(b *strings.Builder) error {
	b.WriteString("### The tier builder on the reference example\n\n`contextlayer.Builder` fills a window by tiers (instructions, evidence, tool output, memory, history): floors are set aside in tier order, the completion reserve is never touched, an item that does not fit whole is compacted only down to its compaction floor (35% of its size) and otherwise dropped, and a higher tier is never shrunk for a lower one. On the reference design's example, a 1,200-token window with 300 reserved and an instructions floor of 380:\n\n")
	_, rep, err := contextlayer.Builder{Window: 1200, Reserve: 300, Floors: map[contextlayer.Tier]int{contextlayer.TierInstructions: 380}}.Build(contextlayer.ReferenceItems())
	if err != nil {
		return err
	}
	b.WriteString("| item | tier | decision | tokens | reason |\n|---|---|---|---:|---|\n")
	for _, d := range rep.Items {
		fmt.Fprintf(b, "| `%s` | %s | %s | %d | %s |\n", d.ID, d.Tier, d.Action, d.Tokens, d.Reason)
	}
	fmt.Fprintf(b, "\nused %d of %d usable, dropped %d of %d offered (used + dropped = offered), utilization %.0f%% of the window; the weakest slot of the U-shaped position curve holds `%s`.", rep.Used, rep.Usable, rep.Dropped, rep.Offered, 100*rep.Utilization, rep.WeakestID)
	_, big, err := contextlayer.Builder{Window: 4000, Reserve: 300}.Build(contextlayer.ReferenceItems())
	if err != nil {
		return err
	}
	fmt.Fprintf(b, " At a 4,000-token window everything fits: used %d, dropped %d, utilization %.0f%%.\n\n", big.Used, big.Dropped, 100*big.Utilization)
	b.WriteString("The runtime assembles each request this way when a run's context spec has `tiers` (`runtime.TierSpec`): the system prompt and task are the instructions, retrieved evidence and recalled memory go into the system prompt with their provenance, each tool result is a tool output and every other turn history. The tiers decide how many tokens the conversation gets; the shrink / summarise / pin layer above packs it into them under its wire rules (a tool result never opens the window without its call). The report is journaled in each `model_request` (`context.tiers`) and set on the chat span (`loomwork.context.tiers.*`); a resume or replay rebuilds the same requests, because evidence and memory are part of the journaled spec.\n\n")
	return nil
}

func staleAge(rep *Report) string {
	if rep.Stale != nil {
		return rep.Stale.Age
	}
	return "120 days"
}

func listOr(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
