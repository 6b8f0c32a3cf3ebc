package experiment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	a2aproto "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/loomwork/loomwork/agents/a2a"
	"github.com/loomwork/loomwork/datasets"
)

// A2AConfig reaches an agent over A2A (JSON-RPC over HTTP, protocol 0.3)
// by its Agent Card: the case's task is sent as one user message
// (message/send, blocking; an unfinished task is polled with tasks/get
// until it ends, within the trial's timeout), and the answer is the
// completed task's artifacts' text (or the agent's message's).
type A2AConfig struct {
	// CardURL is the Agent Card's URL
	// (http://host/.well-known/agent-card.json), or the agent's base URL,
	// under which the card is looked up at the well-known path.
	CardURL string
	Client  *http.Client
}

// Validate reports every problem with the configuration.
func (c *A2AConfig) Validate() error {
	if err := checkURL(c.CardURL); err != nil {
		return fmt.Errorf("a2a card url: %w", err)
	}
	return nil
}

// split is the card URL as a base URL and the card's path under it.
func (c *A2AConfig) split() (base, path string) {
	u, _ := url.Parse(c.CardURL)
	if strings.HasSuffix(u.Path, ".json") {
		path = u.Path
		u.Path, u.RawPath = "", ""
		return strings.TrimRight(u.String(), "/"), path
	}
	return strings.TrimRight(c.CardURL, "/"), ""
}

// A2ATarget implements Target for A2AConfig. The card is resolved by the
// first trial (and again by the next one if that failed); trials share
// one client, each call carrying its own trial's traceparent, tracestate
// and baggage headers.
type A2ATarget struct {
	cfg A2AConfig

	mu     sync.Mutex
	remote *a2a.Remote
}

// NewA2ATarget validates cfg; it connects to nothing.
func NewA2ATarget(cfg A2AConfig) (*A2ATarget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	return &A2ATarget{cfg: cfg}, nil
}

// Describe implements Target.
func (t *A2ATarget) Describe() datasets.ExperimentTarget {
	return datasets.ExperimentTarget{Kind: "a2a", Description: "A2A agent, card " + redactURL(t.cfg.CardURL) + " (message/send)"}
}

// Run implements Target: the card or the endpoint unreachable, HTTP 429,
// 502, 503 or 504 are the infrastructure's; a task that failed, was
// rejected or canceled, asked for input, or did not end before the
// trial's deadline, and a JSON-RPC error, are the agent's.
func (t *A2ATarget) Run(ctx context.Context, req Request) (Response, error) {
	remote, err := t.connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Response{Failure: fmt.Sprintf("no agent card before the trial's deadline (%v)", context.Cause(ctx))}, nil
		}
		return Response{}, err
	}
	// The trial's trace context goes into ctx; the remote's client sends
	// whatever ctx carries (traceparent, tracestate, baggage) on each call.
	rep, err := remote.Ask(req.Trace.context(ctx), req.Case.Task)
	if err != nil {
		return classifyA2A(ctx, err)
	}
	if rep.State != a2aproto.TaskStateCompleted {
		why := rep.Text
		if why == "" {
			why = "no status message"
		}
		return Response{Failure: fmt.Sprintf("A2A task %s ended %s: %s", rep.TaskID, rep.State, why)}, nil
	}
	return Response{Answer: strings.TrimSpace(rep.Text)}, nil
}

// connect resolves the card once.
func (t *A2ATarget) connect(ctx context.Context) (*a2a.Remote, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.remote != nil {
		return t.remote, nil
	}
	base, path := t.cfg.split()
	r, err := a2a.NewRemote(a2a.RemoteConfig{BaseURL: base, CardPath: path, HTTPClient: t.cfg.Client})
	if err != nil {
		return nil, &InfraError{Err: err}
	}
	if err := r.Start(ctx); err != nil {
		var status *agentcard.ErrStatusNotOK
		if errors.As(err, &status) && !retryableStatus(status.StatusCode) {
			// A card that is not there is a wrong --a2a, not a fault to wait out.
			return nil, &InfraError{Err: fmt.Errorf("%s: %w", t.cfg.CardURL, err)}
		}
		return nil, &InfraError{Retryable: true, Err: err}
	}
	t.remote = r
	return r, nil
}

func classifyA2A(ctx context.Context, err error) (Response, error) {
	if ctx.Err() != nil {
		return Response{Failure: fmt.Sprintf("no answer before the trial's deadline (%v)", context.Cause(ctx))}, nil
	}
	if m := a2aStatusRe.FindStringSubmatch(err.Error()); m != nil {
		if retryableStatus(code(m[1])) {
			return Response{}, &InfraError{Retryable: true, Err: err}
		}
		return Response{Failure: "A2A: " + err.Error()}, nil
	}
	if isConnError(err) || strings.Contains(err.Error(), "failed to send HTTP request") {
		return Response{}, &InfraError{Retryable: true, Err: err}
	}
	return Response{Failure: "A2A: " + err.Error()}, nil
}
