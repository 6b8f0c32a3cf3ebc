package web

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/report"
)

// FileSources points the UI at journals, score reports and ablation results
// on disk. Each directory is scanned (not recursively) on every request, so
// files written while the server runs show up.
type FileSources struct {
	// RunsDir holds journals (*.jsonl, as exported by the runtime and
	// committed in baselines/) and, optionally, replay reports (*.json, as
	// written by `loom-eval replay --json`).
	RunsDir string
	// ReportsDir holds score reports (*.json, `loom-eval score --format json`).
	ReportsDir string
	// AblationsDir holds ablation results (*.json, `loom-eval ablate --format json`
	// or the report.json of `loom-eval ablate --out DIR`).
	AblationsDir string
}

// Each listing recognises what a file holds by its content (sniffFile),
// not by its name: a file of the page's kind is shown, and its error if it
// does not read; any other JSON file (a gate policy next to the reports, a
// saved reranker model next to an ablation result) is listed neutrally
// under "other files".

// fileKind is what a JSON or JSONL file holds.
type fileKind string

const (
	kindScoreReport fileKind = "score report"
	kindAblation    fileKind = "ablation result"
	kindReplay      fileKind = "replay report"
	kindJournal     fileKind = "journal"
	kindReranker    fileKind = "reranker model"
	kindGatePolicy  fileKind = "gate policy"
	kindTrials      fileKind = "trial records"
	kindCases       fileKind = "cases"
	kindUnknown     fileKind = ""
)

// fileMarkers are the top-level keys that identify a kind: keys its writer
// always writes, early in the object, so that a truncated file is still
// recognised (and reported as broken). The first match wins.
var fileMarkers = []struct {
	kind fileKind
	keys []string
}{
	{kindScoreReport, []string{"candidate"}},                   // report.Report
	{kindAblation, []string{"dataset", "bootstrap_resamples"}}, // result.Report (retrieval/ablation/result)
	{kindReplay, []string{"reports"}},                          // `loom-eval replay --json`
	{kindJournal, []string{"run", "seq"}},                      // a journal.jsonl line
	{kindReranker, []string{"version", "features"}},            // retrieval.LogisticModel
	{kindTrials, []string{"case_id", "trial"}},                 // datasets.Trial
	{kindCases, []string{"id", "task"}},                        // datasets.Case
}

// gatePolicyMaxBytes bounds the file read to check for a gate policy (a
// few hundred bytes in practice).
const gatePolicyMaxBytes = 1 << 20

// sniffFile recognises what path holds from its first JSON value (the
// whole of a .json file, the first line of a .jsonl file): the kind its
// top-level keys mark, kindUnknown when they mark none. readErr is why
// that value is not well-formed JSON (empty, truncated, not an object), nil
// when it is. A gate policy has no marker key: an unmarked object that
// gate.Parse accepts is one.
func sniffFile(path string) (kind fileKind, readErr error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return kindUnknown, nil, fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	keys, readErr := topLevelKeys(json.NewDecoder(bufio.NewReader(f)))
	for _, m := range fileMarkers {
		all := true
		for _, k := range m.keys {
			all = all && keys[k]
		}
		if all {
			return m.kind, readErr, nil
		}
	}
	if readErr == nil {
		if fi, err := f.Stat(); err == nil && fi.Size() <= gatePolicyMaxBytes {
			if b, err := os.ReadFile(path); err == nil {
				if _, err := gate.Parse(b); err == nil {
					return kindGatePolicy, nil, nil
				}
			}
		}
	}
	return kindUnknown, readErr, nil
}

var errNotObject = errors.New("not a JSON object")

// topLevelKeys reads one JSON object from dec and returns its keys: all of
// them, or those read before the error that stopped it.
func topLevelKeys(dec *json.Decoder) (map[string]bool, error) {
	keys := map[string]bool{}
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return keys, errors.New("empty file")
	}
	if err != nil {
		return keys, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return keys, errNotObject
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys, err
		}
		k, _ := tok.(string)
		keys[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys, fmt.Errorf("value of %q: %w", k, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return keys, err
	}
	return keys, nil
}

// OtherFile is a file in a listed directory that is not of the page's
// kind, with what it is.
type OtherFile struct {
	File string
	What string
}

// describeKind says what a file is, to follow "FILE is".
func describeKind(kind fileKind, readErr error) string {
	switch {
	case kind == kindTrials:
		return string(kind)
	case kind == kindCases:
		return "a cases file"
	case kind == kindAblation:
		return "an " + string(kind)
	case kind != kindUnknown:
		return "a " + string(kind)
	case errors.Is(readErr, errNotObject):
		return "JSON, but not an object this UI reads"
	case readErr != nil:
		return fmt.Sprintf("not readable as JSON (%v)", readErr)
	}
	return "JSON of a kind this UI does not read"
}

func otherFile(name string, kind fileKind, readErr error) OtherFile {
	return OtherFile{File: name, What: describeKind(kind, readErr)}
}

// scanDir sniffs the files in dir with any of the suffixes, in name order,
// and calls visit for each.
func scanDir(dir string, visit func(name, path string, kind fileKind, readErr error), suffixes ...string) error {
	var names []string
	for _, suf := range suffixes {
		ns, err := listFiles(dir, suf)
		if err != nil {
			return err
		}
		names = append(names, ns...)
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue
		}
		p := filepath.Join(dir, n)
		kind, readErr, err := sniffFile(p)
		if err != nil {
			readErr = err
		}
		visit(n, p, kind, readErr)
	}
	return nil
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
func listFiles(dir, suffix string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, suffix) {
			continue
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
	Replay   *journal.ReplayReport
}

// RunsView is the runs page.
type RunsView struct {
	Rows   []RunRow
	Errors []string // journals and replay reports that do not read
	Others []OtherFile
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

// runFiles reads the runs directory: the replay reports by run id (the
// output of `loom-eval replay --json`), the errors of the replay reports
// that do not read, the other files and, with journals, the journals' runs
// and the errors of those that do not read.
func (s *Server) runFiles(journals bool) (RunsView, map[string]*journal.ReplayReport, error) {
	var v RunsView
	reps := map[string]*journal.ReplayReport{}
	type journalFile struct{ name, path string }
	var jfiles []journalFile
	err := scanDir(s.deps.Files.RunsDir, func(name, path string, kind fileKind, readErr error) {
		switch kind {
		case kindJournal:
			jfiles = append(jfiles, journalFile{name, path})
		case kindReplay:
			if readErr != nil {
				v.Errors = append(v.Errors, fmt.Sprintf("replay report %s: %v", name, readErr))
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				v.Errors = append(v.Errors, fmt.Sprintf("replay report %s: %v", name, err))
				return
			}
			var doc struct {
				Reports []journal.ReplayReport `json:"reports"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				v.Errors = append(v.Errors, fmt.Sprintf("replay report %s: not a loom-eval replay --json report: %v", name, err))
				return
			}
			for i := range doc.Reports {
				reps[doc.Reports[i].RunID] = &doc.Reports[i]
			}
		default:
			v.Others = append(v.Others, otherFile(name, kind, readErr))
		}
	}, ".jsonl", ".json")
	if err != nil {
		return RunsView{}, nil, err
	}
	if !journals {
		jfiles = nil
	}
	seen := map[string]bool{}
	for _, j := range jfiles {
		seen[j.path] = true
		rows, err := s.runsMemo.rows(j.name, j.path)
		if err != nil {
			v.Errors = append(v.Errors, err.Error())
			continue
		}
		for _, row := range rows { // a copy: the memo's rows are shared
			row.Replay = reps[row.RunID]
			v.Rows = append(v.Rows, row)
		}
	}
	if journals {
		s.runsMemo.keep(seen)
	}
	return v, reps, nil
}

func (s *Server) runList(w http.ResponseWriter, r *http.Request) {
	v, _, err := s.runFiles(true)
	if err != nil {
		s.fail(w, r, err)
		return
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
	ResultDif *journal.ResultDiff
}

// RunView is the run page.
type RunView struct {
	Run    RunRow
	Steps  []StepRow
	Replay *journal.ReplayReport
	Errors []string // replay reports in the runs directory that do not read
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	p, err := safeFile(s.deps.Files.RunsDir, r.PathValue("file"), ".jsonl")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if kind, readErr, err := sniffFile(p); err != nil {
		s.fail(w, r, err)
		return
	} else if kind != kindJournal {
		s.fail(w, r, badRequest{fmt.Sprintf("%s is %s, not a journal", r.PathValue("file"), describeKind(kind, readErr))})
		return
	}
	runs, err := journal.ReadJSONLFile(p)
	if err != nil {
		s.fail(w, r, badRequest{err.Error()})
		return
	}
	files, reps, err := s.runFiles(false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, run := range runs {
		if run.ID != r.PathValue("run") {
			continue
		}
		v := RunView{Run: summariseRun(r.PathValue("file"), run), Replay: reps[run.ID], Errors: files.Errors}
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

// ReportsView is the reports list: the score reports (those that do not
// read with their error) and the directory's other JSON files.
type ReportsView struct {
	Items  []ReportItem
	Others []OtherFile
}

func (s *Server) readReport(name string) (*report.Report, error) {
	p, err := safeFile(s.deps.Files.ReportsDir, name, ".json")
	if err != nil {
		return nil, err
	}
	kind, readErr, err := sniffFile(p)
	if err != nil {
		return nil, err
	}
	if kind != kindScoreReport {
		return nil, badRequest{fmt.Sprintf("%s is %s, not a score report (write one with loom-eval score --format json)", name, describeKind(kind, readErr))}
	}
	return parseReport(name, p)
}

// parseReport reads the score report at path.
func parseReport(name, path string) (*report.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", name, err)
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
	var v ReportsView
	err := scanDir(s.deps.Files.ReportsDir, func(name, path string, kind fileKind, readErr error) {
		if kind != kindScoreReport {
			v.Others = append(v.Others, otherFile(name, kind, readErr))
			return
		}
		rep, err := parseReport(name, path)
		it := ReportItem{File: name, Report: rep}
		if err != nil {
			it.Err = err.Error()
		}
		v.Items = append(v.Items, it)
	}, ".json")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, ReportListPage(v))
}

func (s *Server) reportPage(w http.ResponseWriter, r *http.Request) {
	rep, err := s.readReport(r.PathValue("file"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, ReportPage(s.reportView(r.PathValue("file"), rep)))
}

func (s *Server) apiReport(w http.ResponseWriter, r *http.Request) {
	rep, err := s.readReport(r.PathValue("file"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
