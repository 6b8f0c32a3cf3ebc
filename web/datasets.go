package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/tracecases"
	"github.com/loomwork/loomwork/store"
)

// Datasets: versioned case sets (datasets.Registry) the UI lists, shows and
// grows from production traces. A person ticks traces on /traces, reviews
// the cases they make (/datasets/draft: ids, tasks, expected tools and
// evidence, an answer check of their own), and commits them as a new
// version of a dataset on the version they reviewed against. Nothing from
// a trace enters a dataset without that review, and a trace's answer is
// shown to the reviewer but never becomes an expected answer by itself.

// datasetFormMaxBytes bounds a draft POST (500 cases of a few KiB each).
const datasetFormMaxBytes = 4 << 20

func (s *Server) registerDatasets() {
	s.mux.HandleFunc("GET /datasets", s.datasetList)
	s.mux.HandleFunc("GET /datasets/draft", s.datasetDraft)
	s.mux.HandleFunc("POST /datasets/draft", s.datasetCommit)
	s.mux.HandleFunc("GET /datasets/{name}", s.datasetPage)
	s.mux.HandleFunc("GET /datasets/{name}/{version}", s.datasetPage)
	s.mux.HandleFunc("GET /datasets/{name}/{version}/cases.jsonl", s.datasetFile)
	s.mux.HandleFunc("GET /api/v1/datasets", s.apiDatasetList)
	s.mux.HandleFunc("GET /api/v1/datasets/{name}", s.apiDataset)
	s.mux.HandleFunc("GET /api/v1/datasets/{name}/{version}", s.apiDataset)
}

var errNoDatasets = errors.New("this server has no datasets folder (start loom-eval serve with --datasets DIR)")

func (s *Server) registry() (datasets.Registry, error) {
	if s.deps.Datasets == "" {
		return datasets.Registry{}, errNoDatasets
	}
	return datasets.Registry{Dir: s.deps.Datasets}, nil
}

// DatasetListView is the /datasets page: each dataset's latest version.
type DatasetListView struct {
	Dir      string
	Latest   []datasets.Version
	Errors   []string
	NoFolder bool
}

func (s *Server) readDatasetList() (DatasetListView, error) {
	reg, err := s.registry()
	if err != nil {
		return DatasetListView{NoFolder: true}, nil
	}
	v := DatasetListView{Dir: reg.Dir, Latest: []datasets.Version{}}
	names, err := reg.Names()
	if err != nil {
		return v, err
	}
	for _, n := range names {
		vs, err := reg.Versions(n)
		if err != nil {
			v.Errors = append(v.Errors, err.Error())
			continue
		}
		v.Latest = append(v.Latest, vs[len(vs)-1])
	}
	return v, nil
}

func (s *Server) datasetList(w http.ResponseWriter, r *http.Request) {
	v, err := s.readDatasetList()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, DatasetListPage(v))
}

func (s *Server) apiDatasetList(w http.ResponseWriter, r *http.Request) {
	v, err := s.readDatasetList()
	if err == nil && v.NoFolder {
		err = errNoDatasets
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"datasets": v.Latest, "errors": v.Errors})
}

// DatasetView is one version of a dataset, with the dataset's history.
type DatasetView struct {
	Version   datasets.Version
	Cases     []datasets.Case
	Versions  []datasets.Version // newest first
	Committed bool               // just committed from a draft
	// Sources maps a case id to the traces it was made from, over every
	// version up to this one (the latest that named it).
	Sources map[string][]string
}

func parseVersion(s string) (int, error) {
	if s == "" || s == "latest" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s, "v"))
	if err != nil || n <= 0 {
		return 0, badRequest{fmt.Sprintf("version %q: want a positive number (v3 or 3) or latest", s)}
	}
	return n, nil
}

func (s *Server) readDataset(r *http.Request) (DatasetView, error) {
	reg, err := s.registry()
	if err != nil {
		return DatasetView{}, err
	}
	name := r.PathValue("name")
	if err := datasets.ValidateDatasetName(name); err != nil {
		return DatasetView{}, badRequest{err.Error()}
	}
	n, err := parseVersion(r.PathValue("version"))
	if err != nil {
		return DatasetView{}, err
	}
	ver, cases, err := reg.Open(name, n)
	if err != nil {
		return DatasetView{}, err
	}
	all, err := reg.Versions(name)
	if err != nil {
		return DatasetView{}, err
	}
	v := DatasetView{Version: ver, Cases: cases, Sources: map[string][]string{}, Committed: r.URL.Query().Get("committed") != ""}
	for _, x := range all {
		if x.Number <= ver.Number {
			for id, ts := range x.Sources {
				v.Sources[id] = ts
			}
		}
	}
	for i := len(all) - 1; i >= 0; i-- {
		v.Versions = append(v.Versions, all[i])
	}
	return v, nil
}

func (s *Server) datasetPage(w http.ResponseWriter, r *http.Request) {
	v, err := s.readDataset(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, DatasetPage(v))
}

func (s *Server) apiDataset(w http.ResponseWriter, r *http.Request) {
	v, err := s.readDataset(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": v.Version, "cases": v.Cases, "versions": v.Versions, "sources": v.Sources})
}

// datasetFile serves a version's cases.jsonl, after Open has checked it
// against its digest: the bytes served are the bytes committed.
func (s *Server) datasetFile(w http.ResponseWriter, r *http.Request) {
	v, err := s.readDataset(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reg, _ := s.registry()
	b, err := os.ReadFile(reg.CasesPath(v.Version.Dataset, v.Version.Number))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", fmt.Sprintf("%s-v%d.jsonl", v.Version.Dataset, v.Version.Number)))
	w.Write(b)
}

// DraftView is the review form: the cases the selected traces make, to be
// edited and committed as a new version of Dataset on Parent.
type DraftView struct {
	CSRF     string
	Traces   []string
	Dataset  string   // the target dataset ("" until chosen)
	Datasets []string // the existing ones, for the chooser
	Parent   int      // the target's latest version when the form was made
	Rows     []DraftRow
	Author   string
	Note     string
	// Error says why the last submission was refused; nothing was written.
	Error    string
	Report   tracecases.Report
	NoFolder bool
}

// DraftRow is one case under review.
type DraftRow struct {
	Include bool
	ID      string
	Task    string
	Tools   string // comma-separated
	// Evidence is required_evidence, comma-separated; Match its
	// evidence_match.
	Evidence string
	Match    string
	Tags     string
	MustPass bool
	// Check is the reviewer's answer check: "" (none), "contains",
	// "equals" or "regex", with CheckValue.
	Check      string
	CheckValue string
	// Sources are the traces the case was made from; Answer what the
	// first of them answered (for the reviewer, never copied).
	Sources []string
	Answer  string
	Notes   []string
	// Existing is the task of the case with this id in the parent
	// version; Replace lets this row replace it.
	Existing string
	Replace  bool
	Error    string
}

// draftTraceIDs reads the selected traces (trace=ID repeated, or one
// comma-separated list), resolving prefixes the way trace pages do.
func (s *Server) draftTraceIDs(r *http.Request, q url.Values) ([]string, error) {
	var ids []string
	for _, v := range q["trace"] {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return nil, badRequest{"parameter trace: select at least one trace (tick them on /traces)"}
	}
	if len(ids) > tracecases.MaxSelected {
		return nil, badRequest{fmt.Sprintf("parameter trace: %d traces selected, at most %d at a time", len(ids), tracecases.MaxSelected)}
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		full, err := s.deps.Traces.ResolveTraceID(r.Context(), id)
		if err != nil {
			return nil, fmt.Errorf("parameter trace %q: %w", id, err)
		}
		if !slices.Contains(out, full) {
			out = append(out, full)
		}
	}
	return out, nil
}

// buildDraft makes the review form for the selected traces and target.
func (s *Server) buildDraft(r *http.Request, q url.Values) (DraftView, error) {
	reg, err := s.registry()
	if err != nil {
		return DraftView{NoFolder: true}, nil
	}
	ids, err := s.draftTraceIDs(r, q)
	if err != nil {
		return DraftView{}, err
	}
	cases, _, rep, err := tracecases.FromTraces(r.Context(), s.deps.Traces, ids)
	if err != nil {
		return DraftView{}, err
	}
	v := DraftView{Traces: ids, Report: rep, Author: labelerFromCookie(r)}
	if v.Datasets, err = reg.Names(); err != nil {
		return v, err
	}
	v.Dataset = strings.TrimSpace(q.Get("dataset"))
	if v.Dataset == "" && len(v.Datasets) > 0 {
		v.Dataset = v.Datasets[0]
	}
	if v.Dataset != "" {
		if err := datasets.ValidateDatasetName(v.Dataset); err != nil {
			return v, badRequest{"parameter dataset: " + err.Error()}
		}
	}
	for i, c := range cases {
		row := DraftRow{Include: true, ID: c.ID, Task: c.Task, Tools: strings.Join(c.ExpectedTools, ", "),
			Evidence: strings.Join(c.RequiredEvidence, ", "), Match: c.EvidenceMatch, Tags: strings.Join(c.Tags, ", ")}
		pc := rep.PerCase[i]
		row.Sources, row.Answer, row.Notes = pc.Traces, pc.Answer, pc.Notes
		v.Rows = append(v.Rows, row)
	}
	return v, s.markExisting(reg, &v)
}

// markExisting sets the target's latest version as the parent and, on
// each row whose id the parent has, that case's task.
func (s *Server) markExisting(reg datasets.Registry, v *DraftView) error {
	v.Parent = 0
	if v.Dataset == "" {
		return nil
	}
	latest, err := reg.Latest(v.Dataset)
	if err != nil || latest == 0 {
		return err
	}
	_, cases, err := reg.Open(v.Dataset, latest)
	if err != nil {
		return err
	}
	v.Parent = latest
	for i := range v.Rows {
		v.Rows[i].Existing = ""
		for _, c := range cases {
			if c.ID == v.Rows[i].ID {
				v.Rows[i].Existing = c.Task
			}
		}
	}
	return nil
}

func (s *Server) datasetDraft(w http.ResponseWriter, r *http.Request) {
	v, err := s.buildDraft(r, r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v.CSRF = s.csrf.token(s.csrf.session(w, r))
	render(w, r, DraftPage(v))
}

// labelerFromCookie is the name the person last labelled or committed
// under, to prefill the author.
func labelerFromCookie(r *http.Request) string {
	if c, err := r.Cookie(labelerCookie); err == nil {
		if v, err := url.QueryUnescape(c.Value); err == nil {
			return v
		}
	}
	return ""
}

// draftFromForm reads a submitted review form back into its view, so a
// refused submission is shown again with every edit kept.
func draftFromForm(r *http.Request) (DraftView, error) {
	f := r.PostForm
	v := DraftView{Dataset: strings.TrimSpace(f.Get("dataset")), Author: strings.TrimSpace(f.Get("author")),
		Note: strings.TrimSpace(f.Get("note")), Traces: f["trace"]}
	var err error
	if v.Parent, err = strconv.Atoi(f.Get("parent")); err != nil || v.Parent < 0 {
		return v, badRequest{fmt.Sprintf("field parent: %q is not a version number", f.Get("parent"))}
	}
	n, err := strconv.Atoi(f.Get("rows"))
	if err != nil || n < 0 || n > tracecases.MaxSelected {
		return v, badRequest{fmt.Sprintf("field rows: %q is not a row count (0-%d)", f.Get("rows"), tracecases.MaxSelected)}
	}
	for i := range n {
		p := fmt.Sprintf("r%d.", i)
		row := DraftRow{Include: f.Get(p+"include") != "", ID: strings.TrimSpace(f.Get(p + "id")), Task: strings.TrimSpace(f.Get(p + "task")),
			Tools: f.Get(p + "tools"), Evidence: f.Get(p + "evidence"), Match: f.Get(p + "match"), Tags: f.Get(p + "tags"),
			MustPass: f.Get(p+"must_pass") != "", Check: f.Get(p + "check"), CheckValue: f.Get(p + "check_value"),
			Sources: f[p+"source"], Answer: f.Get(p + "answer"), Replace: f.Get(p+"replace") != ""}
		v.Rows = append(v.Rows, row)
	}
	return v, nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// caseOf is a reviewed row as a case; the error names the field.
func (row DraftRow) caseOf() (datasets.Case, error) {
	c := datasets.Case{ID: row.ID, Task: row.Task, ExpectedTools: splitList(row.Tools),
		RequiredEvidence: splitList(row.Evidence), EvidenceMatch: row.Match, Tags: splitList(row.Tags), MustPass: row.MustPass}
	value := row.CheckValue
	switch row.Check {
	case "":
	case datasets.GraderContains, datasets.GraderEquals:
		if strings.TrimSpace(value) == "" {
			return c, fmt.Errorf("answer check %s: give the text the answer must %s", row.Check, map[string]string{datasets.GraderContains: "contain", datasets.GraderEquals: "equal"}[row.Check])
		}
		c.Graders = datasets.Graders{{Type: row.Check, Value: &value, IgnoreCase: true}}
	case datasets.GraderRegex:
		c.Graders = datasets.Graders{{Type: datasets.GraderRegex, Pattern: value}}
	default:
		return c, fmt.Errorf("answer check %q: want none, contains, equals or regex", row.Check)
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// versionCases is the parent's cases with the included rows added (or,
// ticked "replace", put in place of the parent's case of that id). Row
// errors are set on the rows; ok is false when any row has one.
func versionCases(parent []datasets.Case, v *DraftView) (cases []datasets.Case, sources map[string][]string, ok bool) {
	cases = slices.Clone(parent)
	sources = map[string][]string{}
	ok = true
	seen := map[string]int{}
	included := 0
	for i := range v.Rows {
		row := &v.Rows[i]
		row.Error, row.Existing = "", ""
		if !row.Include {
			continue
		}
		included++
		c, err := row.caseOf()
		if err != nil {
			row.Error, ok = err.Error(), false
			continue
		}
		if j, dup := seen[c.ID]; dup {
			row.Error, ok = fmt.Sprintf("case id %q is also row %d's: give each case its own id", c.ID, j+1), false
			continue
		}
		seen[c.ID] = i
		at := slices.IndexFunc(parent, func(x datasets.Case) bool { return x.ID == c.ID })
		if at >= 0 {
			row.Existing = parent[at].Task
			if !row.Replace {
				row.Error, ok = fmt.Sprintf("case id %q is already in version %d: rename this case, or tick “replace” to change that one", c.ID, v.Parent), false
				continue
			}
			cases[at] = c
		} else {
			cases = append(cases, c)
		}
		// Sources come back from the form: a version records only trace
		// ids, never text a page could render as something else.
		for _, src := range row.Sources {
			if id, err := store.ParseTraceIDPrefix(src); err != nil || len(id) != store.TraceIDLen {
				row.Error, ok = fmt.Sprintf("source %q is not a trace id", clipRunes(src, 40)), false
			}
		}
		if row.Error != "" {
			continue
		}
		if len(row.Sources) > 0 {
			sources[c.ID] = row.Sources
		}
	}
	if included == 0 {
		v.Error, ok = "no case is ticked to include", false
	}
	return cases, sources, ok
}

func (s *Server) datasetCommit(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, datasetFormMaxBytes)
	if err := r.ParseForm(); err != nil {
		s.labelRefused(w, r, http.StatusBadRequest, fmt.Errorf("dataset form: %w", err))
		return
	}
	if err := s.csrf.check(r); err != nil {
		s.labelRefused(w, r, http.StatusForbidden, err)
		return
	}
	reg, err := s.registry()
	if err != nil {
		s.labelRefused(w, r, http.StatusConflict, err)
		return
	}
	v, err := draftFromForm(r)
	if err != nil {
		s.labelRefused(w, r, http.StatusBadRequest, err)
		return
	}
	v.CSRF = r.PostFormValue(csrfField)
	v.Datasets, _ = reg.Names()
	status, err := s.commitDraft(r, reg, &v)
	if err != nil {
		// Nothing was written: the form comes back with every edit kept.
		v.Error = err.Error()
		s.log.Info("dataset version refused", "dataset", v.Dataset, "status", status, "err", err)
		w.WriteHeader(status)
		render(w, r, DraftPage(v))
		return
	}
	if v.Author != "" {
		http.SetCookie(w, &http.Cookie{Name: labelerCookie, Value: url.QueryEscape(v.Author), Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 365 * 24 * 3600})
	}
	http.Redirect(w, r, fmt.Sprintf("/datasets/%s/v%d?committed=1", v.Dataset, v.Parent), http.StatusSeeOther)
}

// commitDraft commits a reviewed form; on success v.Parent is the new
// version's number. On an error nothing was written, and the status says
// whose it is.
func (s *Server) commitDraft(r *http.Request, reg datasets.Registry, v *DraftView) (int, error) {
	if err := datasets.ValidateDatasetName(v.Dataset); err != nil {
		return http.StatusBadRequest, fmt.Errorf("field dataset: %w", err)
	}
	var parent []datasets.Case
	if v.Parent > 0 {
		var err error
		if _, parent, err = reg.Open(v.Dataset, v.Parent); err != nil {
			return http.StatusConflict, err
		}
	}
	cases, sources, ok := versionCases(parent, v)
	if !ok {
		if v.Error == "" {
			v.Error = "some cases need changes (marked below); nothing was saved"
		}
		return http.StatusBadRequest, errors.New(v.Error)
	}
	ver, err := reg.Commit(v.Dataset, datasets.Change{Parent: v.Parent, Cases: cases, Author: v.Author, Note: v.Note,
		Sources: sources, Now: s.cfg.Now()})
	switch {
	case errors.Is(err, datasets.ErrStaleParent):
		// Someone committed first: review again against the new latest.
		if merr := s.markExisting(reg, v); merr != nil {
			return http.StatusInternalServerError, merr
		}
		return http.StatusConflict, fmt.Errorf("%w; the form now adds to version %d: check the cases marked as existing, then save again", err, v.Parent)
	case errors.Is(err, datasets.ErrNoChange):
		return http.StatusBadRequest, err
	case err != nil:
		var le *datasets.LineError
		if errors.As(err, &le) {
			return http.StatusBadRequest, err
		}
		return http.StatusInternalServerError, err
	}
	s.log.Info("dataset version committed", "dataset", ver.Dataset, "version", ver.Number, "added", len(ver.Added), "changed", len(ver.Changed), "author", ver.Author)
	v.Parent = ver.Number
	return http.StatusSeeOther, nil
}

// experimentListURL lists the experiments that ran a dataset version (by
// its cases.jsonl digest).
func experimentListURL(sha string) string {
	return "/experiments?dataset=" + url.QueryEscape(sha)
}
