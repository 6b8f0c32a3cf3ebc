package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/tracecases"
	"github.com/loomwork/loomwork/store"
)

// Human labels: a person marks a trial pass or fail against one of its
// graders, with a note, from a trace page or a report's trial. The labels
// go to the labels file the graders' agreement reads (datasets.Label, one
// JSON object a line) through datasets.AppendLabel, the writer `loom-eval
// labels add` uses, so `loom-eval labels agreement --labels FILE` reads
// what the UI wrote.
//
// The form changes state, so it is protected twice over: the server's
// auth token (ServeHTTP; browsers sign in with the form at /login, which
// sets a SameSite=Strict session cookie), and a CSRF token tied to the browser's session
// cookie (an HMAC of it under a key the server draws at start) that every
// POST must carry, plus net/http's cross-origin check (Sec-Fetch-Site,
// else Origin against Host). A POST failing either is refused with 403 and
// writes nothing.

const (
	sessionCookie = "loomwork_session"
	labelerCookie = "loomwork_labeler"
	csrfField     = "csrf_token"
	// labelFormMaxBytes bounds a label POST's body (a note is a sentence).
	labelFormMaxBytes = 64 << 10
)

// csrfGuard issues and checks the labels form's CSRF tokens.
type csrfGuard struct {
	key    []byte
	origin *http.CrossOriginProtection
}

func newCSRFGuard() *csrfGuard {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	return &csrfGuard{key: key, origin: http.NewCrossOriginProtection()}
}

// session returns the browser's session id, setting a new session cookie
// when it has none.
func (g *csrfGuard) session(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(sessionCookie); err == nil && len(c.Value) >= 22 {
		return c.Value
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return id
}

// token is the CSRF token of a session.
func (g *csrfGuard) token(session string) string {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte("loomwork/labels-form/1\x00" + session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errForbidden = errors.New("forbidden")

// check refuses a state-changing request from another origin, or without
// the session's CSRF token. r's form must be parsed.
func (g *csrfGuard) check(r *http.Request) error {
	if err := g.origin.Check(r); err != nil {
		return fmt.Errorf("%w: %v", errForbidden, err)
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return fmt.Errorf("%w: no session cookie (open the form again, then submit it)", errForbidden)
	}
	got := r.PostFormValue(csrfField)
	if got == "" {
		return fmt.Errorf("%w: the form has no %s (open the form again, then submit it)", errForbidden, csrfField)
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(g.token(c.Value))) != 1 {
		return fmt.Errorf("%w: the form's %s does not match this session (the server restarted, or the form is not this server's: open it again)", errForbidden, csrfField)
	}
	return nil
}

func (s *Server) registerLabels() {
	s.mux.HandleFunc("GET /labels", s.labelsPage)
	s.mux.HandleFunc("GET /labels/new", s.labelForm)
	s.mux.HandleFunc("POST /labels", s.addLabel)
	s.mux.HandleFunc("GET /labels/export.jsonl", s.exportLabels)
	s.mux.HandleFunc("GET /api/v1/labels", s.apiLabels)
}

// LabelsView is the labels page.
type LabelsView struct {
	File   string // the labels file's path, "" when the server has none
	Labels []datasets.Label
	Err    string // why the file does not read
	Added  int    // the line just added, 0 if none
}

// readLabels reads the labels file; a file not written yet holds none.
func (s *Server) readLabels() ([]datasets.Label, error) {
	ls, err := datasets.LoadLabels(s.deps.Labels)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return ls, err
}

func (s *Server) labelsPage(w http.ResponseWriter, r *http.Request) {
	v := LabelsView{File: s.deps.Labels}
	if v.File != "" {
		ls, err := s.readLabels()
		if err != nil {
			v.Err = err.Error()
		}
		v.Labels = ls
		v.Added, _ = strconv.Atoi(r.URL.Query().Get("added"))
	}
	render(w, r, LabelsPage(v))
}

func (s *Server) apiLabels(w http.ResponseWriter, r *http.Request) {
	if s.deps.Labels == "" {
		s.fail(w, r, fmt.Errorf("labels: %w (start loom-eval serve with --labels FILE)", errNotFound))
		return
	}
	ls, err := s.readLabels()
	if err != nil {
		s.fail(w, r, fmt.Errorf("labels file %s: %w", s.deps.Labels, err))
		return
	}
	if ls == nil {
		ls = []datasets.Label{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"file": filepath.Base(s.deps.Labels), "labels": ls})
}

// exportLabels downloads the labels file as it is on disk.
func (s *Server) exportLabels(w http.ResponseWriter, r *http.Request) {
	if s.deps.Labels == "" {
		s.fail(w, r, fmt.Errorf("labels: %w (start loom-eval serve with --labels FILE)", errNotFound))
		return
	}
	b, err := os.ReadFile(s.deps.Labels)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.fail(w, r, fmt.Errorf("read labels %s: %w", s.deps.Labels, err))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", filepath.Base(s.deps.Labels)))
	w.Write(b)
}

// GraderOption is a grader a label may be about, with the grader's own
// verdict on the trial when a report has it.
type GraderOption struct {
	Name     string
	Type     string
	Required bool
	Verdict  string // "pass", "fail", "error", "" when unknown
	Reason   string
	Report   string // the report the verdict is from
}

// LabelForm is the page that adds a label.
type LabelForm struct {
	File string // the labels file ("" when the server has none)
	CSRF string
	// The trial: from a trace (TraceID) or a report's trial (Report).
	TraceID, Report string
	CaseID          string
	Trial           int // -1 when unknown
	// CaseNote and TrialNote say why the case or the trial is not known
	// (the trace's root does not say); the fields are then editable.
	CaseNote, TrialNote string
	Graders             []GraderOption
	// GraderFree: no report grades this trial, so the grader is typed
	// (Suggest lists the names the reports use for the case).
	GraderFree bool
	Suggest    []string
	Labeler    string
	// Task and Answer are what the labeler judges: the trace's (as graders
	// read it), else the report's task.
	Task, Answer string
	Existing     []datasets.Label // labels of this trial already in the file
	Back         string
	NoAuth       bool // the server runs without an auth token
}

func (s *Server) labelForm(w http.ResponseWriter, r *http.Request) {
	f, err := s.buildLabelForm(r.Context(), r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f.CSRF = s.csrf.token(s.csrf.session(w, r))
	if c, err := r.Cookie(labelerCookie); err == nil {
		f.Labeler, _ = url.QueryUnescape(c.Value)
	}
	render(w, r, LabelFormPage(f))
}

// buildLabelForm resolves the trial a label form is about: ?trace=ID, or
// ?report=FILE&case=ID&trial=N.
func (s *Server) buildLabelForm(ctx context.Context, q url.Values) (LabelForm, error) {
	f := LabelForm{File: s.deps.Labels, Trial: -1, NoAuth: s.cfg.AuthToken == ""}
	switch {
	case q.Get("trace") != "":
		id, err := store.TraceIDOf(ctx, s.deps.Traces, q.Get("trace"))
		if err != nil {
			return f, fmt.Errorf("parameter trace: %w", err)
		}
		c, err := s.loadTrace(ctx, id)
		if err != nil {
			return f, fmt.Errorf("parameter trace: %w", err)
		}
		f.TraceID, f.Back = id, "/traces/"+id
		ref := tracecases.TrialOf(c.spans)
		if ref.Marked {
			f.CaseID, f.Trial, f.TrialNote = ref.CaseID, ref.Trial, ref.TrialWhy
		} else {
			// The case `loom-eval cases from-traces` makes of an unmarked
			// trace, so a label of it pairs with that case's trials.
			f.CaseID = tracecases.UnmarkedCaseID(id)
			f.CaseNote = fmt.Sprintf("This trace has no case id: %s. `loom-eval cases from-traces` makes it case %q, so that is the case filled in; change it if your trials name it otherwise.", ref.CaseWhy, f.CaseID)
		}
	case q.Get("report") != "":
		f.Report, f.CaseID = q.Get("report"), q.Get("case")
		if f.CaseID == "" {
			return f, badRequest{"parameter case: required with report"}
		}
		n, err := strconv.Atoi(q.Get("trial"))
		if err != nil || n < 0 {
			return f, badRequest{fmt.Sprintf("parameter trial: %q is not a trial number", q.Get("trial"))}
		}
		f.Trial = n
		rep, err := s.readReport(f.Report)
		if err != nil {
			return f, fmt.Errorf("parameter report: %w", err)
		}
		t := findTrial(rep.Suite, f.CaseID, f.Trial, "")
		if t == nil {
			return f, fmt.Errorf("parameter trial: trial %d of case %q in report %s: %w", f.Trial, f.CaseID, f.Report, errNotFound)
		}
		f.TraceID = t.TraceID
		f.Back = "/reports/" + f.Report + "#case-" + f.CaseID
		for _, c := range rep.Suite.Cases {
			if c.CaseID == f.CaseID {
				f.Task = c.Task
			}
		}
	default:
		return f, badRequest{"parameters: give trace=ID, or report=FILE with case=ID and trial=N"}
	}
	s.graderOptions(&f)
	if f.TraceID != "" {
		if c, err := s.loadTrace(ctx, f.TraceID); err == nil {
			tr := grade.TranscriptFromSpans(c.spans)
			f.Task, f.Answer = tr.Task, tr.Answer
		}
	}
	if f.File != "" {
		ls, err := s.readLabels()
		if err == nil {
			for _, l := range ls {
				if l.CaseID == f.CaseID && l.Trial == f.Trial {
					f.Existing = append(f.Existing, l)
				}
			}
		}
	}
	return f, nil
}

// findTrial finds a trial in a scored suite by trace id, else by case and
// trial number.
func findTrial(suite *scorer.Suite, caseID string, trial int, traceID string) *scorer.TrialScore {
	if suite == nil {
		return nil
	}
	var byNumber *scorer.TrialScore
	for i := range suite.Cases {
		for j := range suite.Cases[i].Results {
			t := &suite.Cases[i].Results[j]
			if traceID != "" && t.TraceID == traceID {
				return t
			}
			if t.CaseID == caseID && t.Trial == trial && byNumber == nil {
				byNumber = t
			}
		}
	}
	return byNumber
}

// graderOptions fills in the graders a label of f's trial may name: the
// grades of the trial in the form's report, else in the first report (by
// name) that has the trial (by trace id, else by case and trial), else
// free text with the names the reports use for the case.
func (s *Server) graderOptions(f *LabelForm) {
	var names []string
	if s.deps.Files == nil || s.deps.Files.ReportsDir == "" {
		f.GraderFree = true
		return
	}
	files, _ := listFiles(s.deps.Files.ReportsDir, ".json")
	if f.Report != "" {
		files = append([]string{f.Report}, slices.DeleteFunc(files, func(n string) bool { return n == f.Report })...)
	}
	for _, name := range files {
		rep, err := s.readReport(name)
		if err != nil {
			continue
		}
		trial := -2 // no trial number matches an unknown one
		if f.Trial >= 0 {
			trial = f.Trial
		}
		// The form's own report names the trial exactly; another report is
		// searched by trace id first (a trace's trial number may be unknown).
		byTrace := f.TraceID
		if name == f.Report {
			byTrace = ""
		}
		if t := findTrial(rep.Suite, f.CaseID, trial, byTrace); t != nil && len(t.Grades) > 0 {
			if f.Trial < 0 {
				f.Trial, f.TrialNote = t.Trial, fmt.Sprintf("trial %d: report %s has this trace as that trial", t.Trial, name)
			}
			for _, g := range t.Grades {
				o := GraderOption{Name: g.Name, Type: g.Type, Required: g.Required, Reason: g.Reason, Report: name, Verdict: "fail"}
				switch {
				case g.Error != "":
					o.Verdict, o.Reason = "error", g.Error
				case g.Passed:
					o.Verdict = "pass"
				}
				f.Graders = append(f.Graders, o)
			}
			return
		}
		for _, c := range rep.Suite.Cases {
			if c.CaseID != f.CaseID {
				continue
			}
			for _, t := range c.Results {
				for _, g := range t.Grades {
					if !slices.Contains(names, g.Name) {
						names = append(names, g.Name)
					}
				}
			}
		}
	}
	f.GraderFree, f.Suggest = true, names
}

// labelFromForm reads and checks a label POST's fields; the error names
// the field.
func labelFromForm(r *http.Request) (datasets.Label, error) {
	var l datasets.Label
	l.CaseID = strings.TrimSpace(r.PostFormValue("case_id"))
	if l.CaseID == "" {
		return l, badRequest{"field case_id: required"}
	}
	ts := strings.TrimSpace(r.PostFormValue("trial"))
	n, err := strconv.Atoi(ts)
	if err != nil || n < 0 {
		return l, badRequest{fmt.Sprintf("field trial: %q is not a trial number (a non-negative integer)", ts)}
	}
	l.Trial = n
	l.Grader = strings.TrimSpace(r.PostFormValue("grader"))
	if l.Grader == "" {
		return l, badRequest{"field grader: required (the grader whose verdict the label is about)"}
	}
	switch v := r.PostFormValue("verdict"); v {
	case "pass":
		l.Passed = true
	case "fail":
	default:
		return l, badRequest{fmt.Sprintf("field verdict: %q is neither pass nor fail", v)}
	}
	l.Labeler = strings.TrimSpace(r.PostFormValue("labeler"))
	l.Note = strings.TrimSpace(r.PostFormValue("note"))
	if err := l.Validate(); err != nil {
		return l, badRequest{"label: " + err.Error()}
	}
	return l, nil
}

func (s *Server) addLabel(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, labelFormMaxBytes)
	if err := r.ParseForm(); err != nil {
		s.labelRefused(w, r, http.StatusBadRequest, fmt.Errorf("label form: %w", err))
		return
	}
	if err := s.csrf.check(r); err != nil {
		s.labelRefused(w, r, http.StatusForbidden, err)
		return
	}
	if s.deps.Labels == "" {
		s.labelRefused(w, r, http.StatusConflict, errors.New("labels: this server has no labels file (start loom-eval serve with --labels FILE)"))
		return
	}
	l, err := labelFromForm(r)
	if err != nil {
		s.labelRefused(w, r, http.StatusBadRequest, err)
		return
	}
	// A label from a report's trial must name one of that trial's grades:
	// `labels agreement` refuses a label that pairs with no grade.
	if rep := r.PostFormValue("report"); rep != "" {
		sr, err := s.readReport(rep)
		if err != nil {
			s.labelRefused(w, r, http.StatusBadRequest, fmt.Errorf("field report: %w", err))
			return
		}
		t := findTrial(sr.Suite, l.CaseID, l.Trial, "")
		if t == nil {
			s.labelRefused(w, r, http.StatusBadRequest, fmt.Errorf("field trial: report %s has no trial %d of case %q", rep, l.Trial, l.CaseID))
			return
		}
		var names []string
		for _, g := range t.Grades {
			names = append(names, g.Name)
		}
		if !slices.Contains(names, l.Grader) {
			s.labelRefused(w, r, http.StatusBadRequest, fmt.Errorf("field grader: trial %d of case %q has no grade %q in report %s (its grades: %s)", l.Trial, l.CaseID, l.Grader, rep, strings.Join(names, ", ")))
			return
		}
	}
	line, err := datasets.AppendLabel(s.deps.Labels, l)
	if err != nil {
		var de *datasets.DuplicateLabelError
		var le *datasets.LineError
		if errors.As(err, &de) || errors.As(err, &le) {
			s.labelRefused(w, r, http.StatusConflict, err)
			return
		}
		s.labelRefused(w, r, http.StatusInternalServerError, err)
		return
	}
	s.log.Info("label added", "file", s.deps.Labels, "line", line, "case", l.CaseID, "trial", l.Trial, "grader", l.Grader, "passed", l.Passed)
	if l.Labeler != "" {
		http.SetCookie(w, &http.Cookie{Name: labelerCookie, Value: url.QueryEscape(l.Labeler), Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 365 * 24 * 3600})
	}
	http.Redirect(w, r, fmt.Sprintf("/labels?added=%d#label-%d", line, line), http.StatusSeeOther)
}

// labelRefused answers a label POST that wrote nothing.
func (s *Server) labelRefused(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status >= 500 {
		s.log.Error("label not added", "err", err)
	} else {
		s.log.Info("label refused", "status", status, "err", err)
	}
	w.WriteHeader(status)
	render(w, r, ErrorPage(status, err.Error()))
}

// graderKind is a grader's type, and "optional" when it is.
func graderKind(g GraderOption) string {
	if g.Required {
		return g.Type
	}
	return g.Type + ", optional"
}
