package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/loomwork/loomwork/store"
)

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// searchFlags are traces list's search flags. Each becomes clauses of one
// search expression (store.ParseSearch), so the flags, the JSON API's q=
// and the UI's search box accept and refuse the same things.
type searchFlags struct {
	query                               *string
	attrs, names, evidence, retr, cited repeated
}

func addSearchFlags(fs *flag.FlagSet) *searchFlags {
	sf := &searchFlags{}
	sf.query = fs.String("query", "", "search expression, e.g. 'gen_ai.request.model=gpt-4o gen_ai.usage.input_tokens>1000 evidence:doc-42' (docs/search.md)")
	fs.Var(&sf.attrs, "attr", "attribute clause: KEY (is set), KEY=V, KEY!=V, KEY>N, KEY>=N, KEY<N, KEY<=N; repeatable, all must hold")
	fs.Var(&sf.names, "span-name", "a span named exactly this; repeatable")
	fs.Var(&sf.evidence, "evidence", "a span retrieved or cited this document id; repeatable")
	fs.Var(&sf.retr, "retrieved", "a span retrieved this document id; repeatable")
	fs.Var(&sf.cited, "cited", "a span cited this document id; repeatable")
	return sf
}

// expr is the flags as one search expression, or a usage error naming the
// flag whose value is not a clause of its kind.
func (sf *searchFlags) expr() (string, error) {
	var parts []string
	if q := strings.TrimSpace(*sf.query); q != "" {
		if _, err := store.ParseSearch(q); err != nil {
			return "", usageError("--query: %v", err)
		}
		parts = append(parts, q)
	}
	for _, a := range sf.attrs {
		c, err := store.ParseSearch(a)
		if err != nil {
			return "", usageError("--attr %q: %v", a, err)
		}
		if len(c) != 1 || c[0].Field != store.FieldAttr {
			return "", usageError("--attr %q: want one attribute clause (KEY, KEY=V, KEY>N...); use --query for several", a)
		}
		parts = append(parts, c[0].String())
	}
	for _, f := range []struct {
		vals  repeated
		field store.SearchField
	}{{sf.names, store.FieldName}, {sf.evidence, store.FieldEvidence}, {sf.retr, store.FieldRetrieved}, {sf.cited, store.FieldCited}} {
		for _, v := range f.vals {
			parts = append(parts, store.SearchClause{Field: f.field, Op: store.OpEq, Value: v}.String())
		}
	}
	return strings.Join(parts, " "), nil
}

// runSessions lists stored sessions or shows one. It opens the store
// read-only, so it works while serve is writing.
func (m *Main) runSessions(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("sessions: want a subcommand: sessions list [--limit N] [--page-token T] | sessions get SESSION_ID")
	}
	switch args[0] {
	case "list":
		return m.runSessionsList(ctx, args[1:])
	case "get":
		return m.runSessionsGet(ctx, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(m.Stderr, "Usage: loom-eval sessions list [--limit N] [--page-token T] [--json] | loom-eval sessions get SESSION_ID [--json]")
		fmt.Fprintln(m.Stderr, "A session is the traces (turns) sharing a gen_ai.conversation.id or OpenInference session.id.")
		return nil
	}
	return usageError("sessions: unknown subcommand %q (want list or get)", args[0])
}

func (m *Main) runSessionsList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("sessions list", "sessions list [--limit N] [--page-token T] [--json] [--store URL]")
	storeURL := m.tracesStoreFlag(fs)
	asJSON := fs.Bool("json", false, "print the page as JSON")
	limit := fs.String("limit", "", store.SessionQueryParams["limit"])
	token := fs.String("page-token", "", store.SessionQueryParams["page_token"])
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("sessions list: unexpected arguments %q", fs.Args())
	}
	v := url.Values{}
	if *limit != "" {
		v.Set("limit", *limit)
	}
	if *token != "" {
		v.Set("page_token", *token)
	}
	q, err := store.ParseSessionQuery(v)
	if err != nil {
		return usageError("sessions list: %s", strings.ReplaceAll(err.Error(), "page_token", "page-token"))
	}
	st, err := m.tracesOpenStore(ctx, *storeURL)
	if err != nil {
		return err
	}
	defer st.Shutdown(context.WithoutCancel(ctx))
	sl, ok := st.(store.SessionLister)
	if !ok {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("sessions list: this trace store cannot list sessions")}
	}
	page, err := sl.ListSessions(ctx, q)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("sessions list: %w", err)}
	}
	if *asJSON {
		return tracesWriteJSON(m.Stdout, page)
	}
	printSessions(termSafe(m.Stdout), page)
	return nil
}

func printSessions(w io.Writer, page store.SessionPage) {
	if len(page.Sessions) == 0 {
		fmt.Fprintln(w, "No sessions: no stored span carries gen_ai.conversation.id or session.id.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tTURNS\tFIRST TURN (UTC)\tLAST TURN (UTC)\tSPANS\tERRORS\tTOKENS IN/OUT")
	for _, s := range page.Sessions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d/%d\n", s.SessionID, s.Turns,
			s.FirstStart.UTC().Format("2006-01-02 15:04:05"), s.LastStart.UTC().Format("2006-01-02 15:04:05"),
			s.SpanCount, s.ErrorCount, s.InputTokens, s.OutputTokens)
	}
	tw.Flush()
	if page.NextPageToken != "" {
		fmt.Fprintf(w, "\nMore sessions: add --page-token %s\n", page.NextPageToken)
	}
}

func (m *Main) runSessionsGet(ctx context.Context, args []string) error {
	fs := m.newFlagSet("sessions get", "sessions get SESSION_ID [--json] [--store URL]")
	storeURL := m.tracesStoreFlag(fs)
	asJSON := fs.Bool("json", false, "print the session and its turns as JSON")
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usageError("sessions get: unexpected arguments %q", fs.Args())
	}
	if strings.TrimSpace(id) == "" {
		return usageError("sessions get: want a SESSION_ID (see loom-eval sessions list)")
	}
	st, err := m.tracesOpenStore(ctx, *storeURL)
	if err != nil {
		return err
	}
	defer st.Shutdown(context.WithoutCancel(ctx))
	sess, err := store.ReadSession(ctx, st, id)
	switch {
	case err == nil:
	case errors.Is(err, store.ErrNotFound):
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("sessions get: %w", err)}
	default:
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("sessions get: %w", err)}
	}
	if *asJSON {
		return tracesWriteJSON(m.Stdout, sess)
	}
	out := termSafe(m.Stdout)
	fmt.Fprintf(out, "Session %s  %d turns  %s → %s  tokens %d/%d  %d spans  %d errors\n\n", sess.SessionID, sess.Turns,
		sess.FirstStart.UTC().Format("2006-01-02 15:04:05"), sess.LastStart.UTC().Format("2006-01-02 15:04:05"),
		sess.InputTokens, sess.OutputTokens, sess.SpanCount, sess.ErrorCount)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TURN\tTRACE ID\tSTART (UTC)\tDURATION\tROOT\tMODEL CALLS\tTOOL CALLS\tTOKENS IN/OUT\tSPANS\tERRORS")
	for i, t := range sess.Traces {
		root := t.RootName
		if root == "" {
			root = "(root not received)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%d\t%d\n", i+1, t.TraceID, t.Start.UTC().Format("2006-01-02 15:04:05"),
			tracesDur(t.Duration), tracesClip(root, 40), t.ModelCalls, t.ToolCalls, t.InputTokens, t.OutputTokens, t.SpanCount, t.ErrorCount)
	}
	fmt.Fprintf(tw, "TOTAL\t\t\t\t\t%d\t%d\t%d/%d\t%d\t%d\n", sess.ModelCalls, sess.ToolCalls, sess.InputTokens, sess.OutputTokens, sess.SpanCount, sess.ErrorCount)
	tw.Flush()
	if sess.Truncated {
		fmt.Fprintf(out, "\nOnly the first %d turns are listed and summed.\n", len(sess.Traces))
	}
	return nil
}
