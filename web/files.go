package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/replay"
	"github.com/loomwork/loomwork/replay/journal"
	"github.com/loomwork/loomwork/scorer/report"
)

// FileSources points the UI at journals, score reports and ablation results
// on disk. Each directory is scanned (not recursively) on every request, so
// files written while the server runs show up.
type FileSources struct {
	// RunsDir holds journals (*.jsonl, as exported by the runtime and
	// committed in baselines/) and, optionally, replay reports
	// (*.replay.json, as written by `loom-eval replay --json`).
	RunsDir string
	// ReportsDir holds score reports (*.json, `loom-eval score --format json`).
	ReportsDir string
	// AblationsDir holds ablation results (*.json, `loom-eval ablate --format json`)
	// and their charts (*.svg).
	AblationsDir string
}

func (s *Server) registerFiles() {
	s.mux.HandleFunc("GET /runs", s.runList)
	s.mux.HandleFunc("GET /runs/{file}", s.runFile)
	s.mux.HandleFunc("GET /runs/{file}/{run}", s.runPage)
	s.mux.HandleFunc("GET /reports", s.reportList)
	s.mux.HandleFunc("GET /reports/{file}", s.reportPage)
	s.mux.HandleFunc("GET /api/v1/reports/{file}", s.apiReport)
	s.mux.HandleFunc("GET /ablations", s.ablationList)
	s.mux.HandleFunc("GET /ablations/{file}", s.ablationPage)
	s.mux.HandleFunc("GET /ablations/{file}/chart.svg", s.ablationChart)
}

// listFiles returns the base names in dir with the suffix, sorted.
func listFiles(dir, suffix string, exclude ...string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []string
next:
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, suffix) {
			continue
		}
		for _, x := range exclude {
			if strings.HasSuffix(n, x) {
				continue next
			}
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// safeFile resolves a file name from a URL inside dir, refusing anything
// that is not a plain base name with the suffix.
func safeFile(dir, name, suffix string) (string, error) {
	if dir == "" || name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, suffix) {
		return "", badRequest{fmt.Sprintf("file %q: not a %s file name in this directory", name, suffix)}
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("file %q: %w", name, errNotFound)
		}
		return "", err
	}
	return p, nil
}

var errNotFound = fmt.Errorf("not found")

// RunRow is one journaled run.
type RunRow struct {
	File     string
	RunID    string
	Agent    string
	CaseID   string
	Trial    int
	Label    string
	Events   int
	Finished bool
	Answer   string
	Replay   *replay.Report
}

// RunsView is the runs page.
type RunsView struct {
	Rows   []RunRow
	Errors []string
}

func summariseRun(file string, r journal.Run) RunRow {
	row := RunRow{File: file, RunID: r.ID, Events: len(r.Events)}
	for _, e := range r.Events {
		switch e.Kind {
		case journal.KindRunStarted:
			var st journal.RunStarted
			if json.Unmarshal(e.Payload, &st) == nil {
				row.Agent, row.CaseID, row.Trial = st.Agent, st.CaseID, st.Trial
			}
		case journal.KindModelResponse:
			if row.Label == "" {
				row.Label = e.Label
			}
		case journal.KindRunFinished:
			row.Finished = true
			var fin journal.RunFinished
			if json.Unmarshal(e.Payload, &fin) == nil {
				row.Answer = fin.Answer
			}
		}
	}
	return row
}

// replayReports reads *.replay.json files: the output of `loom-eval replay --json`.
func (s *Server) replayReports() map[string]*replay.Report {
	out := map[string]*replay.Report{}
	names, _ := listFiles(s.deps.Files.RunsDir, ".replay.json")
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(s.deps.Files.RunsDir, n))
		if err != nil {
			continue
		}
		var doc struct {
			Reports []replay.Report `json:"reports"`
		}
		if json.Unmarshal(b, &doc) != nil {
			continue
		}
		for i := range doc.Reports {
			out[doc.Reports[i].RunID] = &doc.Reports[i]
		}
	}
	return out
}

func (s *Server) runList(w http.ResponseWriter, r *http.Request) {
	names, err := listFiles(s.deps.Files.RunsDir, ".jsonl")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reps := s.replayReports()
	var v RunsView
	for _, n := range names {
		runs, err := journal.ReadJSONLFile(filepath.Join(s.deps.Files.RunsDir, n))
		if err != nil {
			v.Errors = append(v.Errors, err.Error())
			continue
		}
		for _, run := range runs {
			row := summariseRun(n, run)
			row.Replay = reps[run.ID]
			v.Rows = append(v.Rows, row)
		}
	}
	render(w, r, RunListPage(v))
}

func (s *Server) runFile(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/runs#"+r.PathValue("file"), http.StatusFound)
}

// StepRow is one journal event on the run page.
type StepRow struct {
	Seq       int64
	Line      int
	Kind      string
	Step      int
	Tool      string
	CallID    string
	Label     string
	Summary   string
	Detail    string
	Diverged  bool
	ResultDif *replay.ResultDiff
}

// RunView is the run page.
type RunView struct {
	Run    RunRow
	Steps  []StepRow
	Replay *replay.Report
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	p, err := safeFile(s.deps.Files.RunsDir, r.PathValue("file"), ".jsonl")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	runs, err := journal.ReadJSONLFile(p)
	if err != nil {
		s.fail(w, r, badRequest{err.Error()})
		return
	}
	for _, run := range runs {
		if run.ID != r.PathValue("run") {
			continue
		}
		v := RunView{Run: summariseRun(r.PathValue("file"), run), Replay: s.replayReports()[run.ID]}
		for i, e := range run.Events {
			sr := StepRow{Seq: e.Seq, Line: run.Lines[i], Kind: string(e.Kind), Step: e.Step, Tool: e.Tool, CallID: e.CallID, Label: e.Label}
			sr.Summary, sr.Detail = describeEvent(e)
			if v.Replay != nil {
				if d := v.Replay.Divergence; d != nil && int64(d.Seq) == e.Seq {
					sr.Diverged = true
				}
				for k := range v.Replay.ResultDiffs {
					if v.Replay.ResultDiffs[k].Seq == e.Seq {
						sr.ResultDif = &v.Replay.ResultDiffs[k]
					}
				}
			}
			v.Steps = append(v.Steps, sr)
		}
		render(w, r, RunPage(v))
		return
	}
	s.fail(w, r, fmt.Errorf("run %q in %s: %w", r.PathValue("run"), r.PathValue("file"), errNotFound))
}

// describeEvent gives a one-line summary and the full payload of an event.
func describeEvent(e journal.Event) (string, string) {
	detail := prettyJSON(string(e.Payload))
	switch e.Kind {
	case journal.KindRunStarted:
		var st journal.RunStarted
		if json.Unmarshal(e.Payload, &st) == nil {
			return fmt.Sprintf("%s starts: %s", st.Agent, clipText(st.Input, 160)), detail
		}
	case journal.KindModelResponse:
		var resp struct {
			Message struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					Name string `json:"name"`
				} `json:"tool_calls"`
			} `json:"message"`
			Model string `json:"model"`
		}
		if json.Unmarshal(e.Payload, &resp) == nil {
			var calls []string
			for _, c := range resp.Message.ToolCalls {
				calls = append(calls, c.Name)
			}
			s := clipText(resp.Message.Content, 140)
			if len(calls) > 0 {
				s = strings.TrimSpace(s + " → calls " + strings.Join(calls, ", "))
			}
			return s, detail
		}
	case journal.KindToolResult:
		var tr journal.ToolResult
		if json.Unmarshal(e.Payload, &tr) == nil {
			pre := ""
			if tr.IsError {
				pre = "error: "
			}
			return pre + clipText(tr.Content, 160), detail
		}
	case journal.KindEffect:
		var ef journal.Effect
		if json.Unmarshal(e.Payload, &ef) == nil {
			return clipText(ef.Statement, 120) + " · key " + shortID(ef.Key), detail
		}
	case journal.KindRunFinished:
		var fin journal.RunFinished
		if json.Unmarshal(e.Payload, &fin) == nil {
			return clipText(fin.Answer, 160), detail
		}
	}
	return clipText(string(e.Payload), 140), detail
}

func clipText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// ReportItem is one report file in the list.
type ReportItem struct {
	File   string
	Report *report.Report
	Err    string
}

func (s *Server) readReport(name string) (*report.Report, error) {
	p, err := safeFile(s.deps.Files.ReportsDir, name, ".json")
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, badRequest{fmt.Sprintf("report %s: not a loom-eval score JSON report: %v", name, err)}
	}
	if rep.Suite == nil {
		return nil, badRequest{fmt.Sprintf("report %s: no candidate suite in it (write it with loom-eval score --format json)", name)}
	}
	return &rep, nil
}

func (s *Server) reportList(w http.ResponseWriter, r *http.Request) {
	names, err := listFiles(s.deps.Files.ReportsDir, ".json")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var items []ReportItem
	for _, n := range names {
		rep, err := s.readReport(n)
		it := ReportItem{File: n, Report: rep}
		if err != nil {
			it.Err = err.Error()
		}
		items = append(items, it)
	}
	render(w, r, ReportListPage(items))
}

func (s *Server) reportPage(w http.ResponseWriter, r *http.Request) {
	rep, err := s.readReport(r.PathValue("file"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, ReportPage(r.PathValue("file"), rep))
}

func (s *Server) apiReport(w http.ResponseWriter, r *http.Request) {
	rep, err := s.readReport(r.PathValue("file"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
