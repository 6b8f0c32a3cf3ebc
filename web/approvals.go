package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Approvals is the approval queue as the UI sees it: runs suspended for a
// human — a workflow at an approval step, an agent run at a tool call its
// policy held — and the answer. cmd wires it to the queue beside the
// journal (package agents/approvals); the UI never opens the journal
// itself.
type Approvals interface {
	Pending(ctx context.Context) ([]PendingApproval, error)
	// Answer answers run's approval step (the workflow step, or the tool
	// call id).
	Answer(ctx context.Context, runID, step string, approved bool, approver, reason string) error
}

// Kinds of PendingApproval.
const (
	ApprovalWorkflow = "workflow"  // a workflow's approval step
	ApprovalToolCall = "tool_call" // an agent run's held tool call
)

// PendingApproval is one run waiting at one approval.
type PendingApproval struct {
	RunID string
	// Kind is ApprovalWorkflow or ApprovalToolCall ("" is a workflow).
	Kind string
	// Workflow names the workflow, or the agent of a held call.
	Workflow string
	// Step is the workflow step, or the held call's id: what an answer
	// names.
	Step string
	// Tool, Arguments (clipped), Reason and Origin describe a held call:
	// the tool, what it would be called with, and why a human must
	// decide (the verdict's reason and the taint origin).
	Tool      string
	Arguments string
	Reason    string
	Origin    string
	// Prompt is what a workflow gate asks the human (its approval step's
	// rendered prompt; "" for a step without one, and for held calls).
	Prompt string
	Since  time.Time
}

// ApprovalsView is the /approvals page.
type ApprovalsView struct {
	Configured bool // the server has an approvals journal
	NoAuth     bool // the server has no token: answers are refused
	Pending    []PendingApproval
	CSRF       string
	Answered   string // "RUN/STEP approved" after a redirect
	Err        string
}

const approvalFormMaxBytes = 16 << 10

func (s *Server) registerApprovals() {
	s.mux.HandleFunc("GET /approvals", s.approvalsPage)
	s.mux.HandleFunc("POST /approvals", s.answerApproval)
}

func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	v := ApprovalsView{Configured: s.deps.Approvals != nil, NoAuth: s.cfg.AuthToken == "", Answered: r.URL.Query().Get("answered")}
	if v.Configured {
		p, err := s.deps.Approvals.Pending(r.Context())
		if err != nil {
			v.Err = err.Error()
		}
		v.Pending = p
	}
	v.CSRF = s.csrf.token(s.csrf.session(w, r))
	render(w, r, ApprovalsPage(v))
}

// answerApproval records an approval or a denial. It requires the
// server's token (a request reaching it is authenticated: ServeHTTP
// refuses the others), a same-origin request, and the session's CSRF
// token; the approver is journaled with the answer.
func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, err error) {
		s.log.Info("approval refused", "status", status, "err", err)
		w.WriteHeader(status)
		render(w, r, ErrorPage(status, err.Error()))
	}
	if s.cfg.AuthToken == "" {
		refuse(http.StatusForbidden, errors.New("approvals need authentication: start loom-eval serve with --auth-token (or answer with loom-eval approve / deny)"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, approvalFormMaxBytes)
	if err := r.ParseForm(); err != nil {
		refuse(http.StatusBadRequest, fmt.Errorf("approval form: %w", err))
		return
	}
	if err := s.csrf.check(r); err != nil {
		refuse(http.StatusForbidden, err)
		return
	}
	if s.deps.Approvals == nil {
		refuse(http.StatusConflict, errors.New("approvals: this server has no approvals journal (start loom-eval serve with --approvals-journal FILE)"))
		return
	}
	run, step := r.PostFormValue("run"), r.PostFormValue("step")
	approver := strings.TrimSpace(r.PostFormValue("approver"))
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	decision := r.PostFormValue("decision")
	switch {
	case run == "" || step == "":
		refuse(http.StatusBadRequest, errors.New("fields run and step are required"))
		return
	case approver == "":
		refuse(http.StatusBadRequest, errors.New("field approver is required: the answer is journaled with who gave it"))
		return
	case decision != "approve" && decision != "deny":
		refuse(http.StatusBadRequest, fmt.Errorf("field decision must be approve or deny (got %q)", decision))
		return
	case decision == "deny" && reason == "":
		refuse(http.StatusBadRequest, errors.New("field reason is required to deny"))
		return
	}
	if err := s.deps.Approvals.Answer(r.Context(), run, step, decision == "approve", approver, reason); err != nil {
		refuse(http.StatusConflict, err)
		return
	}
	verb := map[string]string{"approve": "approved", "deny": "denied"}[decision]
	http.Redirect(w, r, "/approvals?answered="+url.QueryEscape(run+"/"+step+" "+verb), http.StatusSeeOther)
}
