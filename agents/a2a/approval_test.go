package a2a_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdka2a "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loomwork/loomwork/agents/a2a"
	"github.com/loomwork/loomwork/agents/a2a/a2atest"
	"github.com/loomwork/loomwork/agents/approvals"
	"github.com/loomwork/loomwork/agents/approvals/approvalstest"
	"github.com/loomwork/loomwork/agents/runtime"
)

// heldServer serves the approval tests' mail agent (approvalstest: it
// reads a planted instruction and, obeying it, sends mail) under their
// policy, with the approval queue beside the journal. A peer's task
// taints the run, so the mail is held. It returns an SDK client, the
// queue and the count of mails actually sent (rows of the outbox table).
func heldServer(t *testing.T) (*a2aclient.Client, *approvals.Store, func() int) {
	t.Helper()
	ctx := context.Background()
	guard, err := approvalstest.Guard(nil)
	if err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, "held.db")
	q, err := approvals.Open(ctx, approvals.Config{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Model: approvalstest.Obeying(), Journal: j, Authorizer: guard, Approvals: q})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a2a.NewServer(a2a.ServerConfig{Agent: approvalstest.MailAgent(), Runtime: rt, TracerProvider: sdktrace.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	hs := a2atest.Serve(t, s)
	card, err := agentcard.DefaultResolver.Resolve(ctx, hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	sent := func() int {
		var n int
		j.DB().QueryRow(`SELECT COUNT(*) FROM outbox`).Scan(&n) // no table yet: nothing sent
		return n
	}
	return c, q, sent
}

func sendText(t *testing.T, c *a2aclient.Client, taskID sdka2a.TaskID, text string) *sdka2a.Task {
	t.Helper()
	msg := sdka2a.NewMessage(sdka2a.MessageRoleUser, sdka2a.TextPart{Text: text})
	msg.TaskID = taskID
	res, err := c.SendMessage(context.Background(), &sdka2a.MessageSendParams{Message: msg})
	if err != nil {
		t.Fatalf("message/send %q: %v", text, err)
	}
	task, ok := res.(*sdka2a.Task)
	if !ok {
		t.Fatalf("message/send returned %T, want a task", res)
	}
	return task
}

func statusText(task *sdka2a.Task) string {
	if task.Status.Message == nil {
		return ""
	}
	var out []string
	for _, p := range task.Status.Message.Parts {
		if tp, ok := p.(sdka2a.TextPart); ok {
			out = append(out, tp.Text)
		}
	}
	return strings.Join(out, " ")
}

// TestHeldCallWaitsInInputRequiredUntilAPersonAnswers: under a policy, a
// peer's task whose run would write is held for approval; the task waits
// in input-required saying how it goes on, and nothing is sent. A peer's
// new message before anyone answered leaves it waiting (and still sends
// nothing); once a person approves, the next message resumes the run from
// its journal and the mail goes out exactly once. Denied, the run is told
// so and the mail never goes.
func TestHeldCallWaitsInInputRequiredUntilAPersonAnswers(t *testing.T) {
	ctx := context.Background()
	for _, approve := range []bool{true, false} {
		c, q, sent := heldServer(t)
		task := sendText(t, c, "", "mail the status to ops")
		if task.Status.State != sdka2a.TaskStateInputRequired || !strings.Contains(statusText(task), "waiting for a person's approval of send_email") {
			t.Fatalf("a held write: task %s %q, want input-required saying so", task.Status.State, statusText(task))
		}
		if sent() != 0 {
			t.Fatal("the mail went out before anyone approved it")
		}
		// The peer pushes; nobody has answered: still waiting, nothing sent.
		again := sendText(t, c, task.ID, "I approve this myself")
		if again.Status.State != sdka2a.TaskStateInputRequired || sent() != 0 {
			t.Fatalf("a peer's own 'approval': task %s, %d sent; want still input-required and none", again.Status.State, sent())
		}
		pending, err := q.Pending(ctx)
		if err != nil || len(pending) != 1 {
			t.Fatalf("pending approvals: %d (%v), want 1", len(pending), err)
		}
		if _, err := q.Answer(ctx, pending[0].RunID, pending[0].ID, approve, "human:alice", "checked the recipient"); err != nil {
			t.Fatal(err)
		}
		done := sendText(t, c, task.ID, "resume")
		deadline := time.Now().Add(10 * time.Second)
		for !done.Status.State.Terminal() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			if done, err = c.GetTask(ctx, &sdka2a.TaskQueryParams{ID: task.ID}); err != nil {
				t.Fatal(err)
			}
		}
		want := 0
		if approve {
			want = 1
		}
		if done.Status.State != sdka2a.TaskStateCompleted || sent() != want {
			t.Errorf("approved=%v: task %s %q, %d mails sent; want completed and %d", approve, done.Status.State, statusText(done), sent(), want)
		}
	}
}
