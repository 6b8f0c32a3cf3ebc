package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otelsemconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Task is one entry of the task list: the case it is, and the question.
type Task struct {
	CaseID string `json:"case_id"`
	Task   string `json:"task"`
}

// ReadTasks decodes a task list: a JSON array of {"case_id", "task"},
// strictly (unknown fields, an empty case_id or task, a case given twice
// are errors naming name and the entry).
func ReadTasks(r io.Reader, name string) ([]Task, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var tasks []Task
	if err := dec.Decode(&tasks); err != nil {
		return nil, fmt.Errorf("%s: %w (want a JSON array of {\"case_id\": ..., \"task\": ...})", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: trailing data after the array", name)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%s: no tasks", name)
	}
	seen := map[string]int{}
	for i, t := range tasks {
		switch {
		case strings.TrimSpace(t.CaseID) == "":
			return nil, fmt.Errorf("%s: task [%d]: case_id is empty", name, i)
		case strings.TrimSpace(t.Task) == "":
			return nil, fmt.Errorf("%s: task [%d] (%s): task is empty", name, i, t.CaseID)
		}
		if prev, dup := seen[t.CaseID]; dup {
			return nil, fmt.Errorf("%s: task [%d]: case_id %q is also task [%d]'s", name, i, t.CaseID, prev)
		}
		seen[t.CaseID] = i
	}
	return tasks, nil
}

// Options shape a run of the task list.
type Options struct {
	// Agent is gen_ai.agent.name.
	Agent string
	// Trials runs each task this many times (loomwork.trial 0, 1, ...).
	Trials int
	// Precision is how many decimals an answer keeps. The tool computes
	// the exact value; the "model" rounds it when it writes the answer,
	// so a grader with no tolerance rejects a right answer.
	Precision int
	// End is when the last simulated run ends; the runs are dated back
	// from it (each lasts a simulated, deterministic time).
	End time.Time
}

// Result is one run: its trace and its answer.
type Result struct {
	CaseID  string
	Trial   int
	TraceID string
	Answer  string
	Failed  bool
}

// The toy's "model" and data source names.
const (
	provider      = "toy"
	requestModel  = "toy-calculator"
	responseModel = "toy-calculator-2026-01"
	dataSource    = "formulas"
	toolName      = "calculator"
	systemPrompt  = "You answer arithmetic questions. Look up the formula, call the calculator, then answer in one sentence."
)

// Run runs every task opt.Trials times, each run one trace of tp's: an
// invoke_agent root marked with the case id, a retrieval of the formula,
// a chat call that asks for the calculator, the execute_tool span, and a
// chat call that writes the answer. Nothing is sent until the caller
// flushes tp.
func Run(ctx context.Context, tp trace.TracerProvider, tasks []Task, opt Options) []Result {
	if opt.Trials < 1 {
		opt.Trials = 1
	}
	tr := tp.Tracer("loomwork-toyagent", trace.WithInstrumentationVersion("0.1.0"))
	runs := len(tasks) * opt.Trials
	// Every run lasts runLength of simulated time; the first starts so
	// that the last ends at opt.End.
	at := opt.End.Add(-time.Duration(runs) * runLength)
	var out []Result
	for trial := 0; trial < opt.Trials; trial++ {
		for _, t := range tasks {
			out = append(out, runOne(ctx, tr, t, trial, at, opt))
			at = at.Add(runLength)
		}
	}
	return out
}

// runLength is the simulated length of one run, spans included.
const runLength = 2 * time.Second

func runOne(ctx context.Context, tr trace.Tracer, t Task, trial int, start time.Time, opt Options) Result {
	conv := fmt.Sprintf("toy-%s-t%d", t.CaseID, trial)
	ms := func(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }
	ctx, root := tr.Start(ctx, "invoke_agent "+opt.Agent, trace.WithTimestamp(ms(0)), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			otelsemconv.GenAIOperationNameInvokeAgent,
			otelsemconv.GenAIAgentName(opt.Agent),
			otelsemconv.GenAIConversationID(conv),
			otelsemconv.GenAIProviderNameKey.String(provider),
			otelsemconv.GenAIRequestModel(requestModel),
			attribute.String(keyCaseID, t.CaseID),
			attribute.Int(keyTrial, trial),
			otelsemconv.GenAIInputMessagesKey.String(messages(message{Role: "user", Parts: []part{{Type: "text", Content: t.Task}}})),
		))
	res := Result{CaseID: t.CaseID, Trial: trial, TraceID: root.SpanContext().TraceID().String()}
	defer func() { root.End(trace.WithTimestamp(ms(1900))) }()

	q, err := parse(t.Task)
	if err != nil {
		// A question the toy cannot read: it says so, and the run failed.
		res.Answer, res.Failed = "I can only answer the mean, sum, median, maximum or minimum of a list of numbers.", true
		root.SetAttributes(otelsemconv.GenAIOutputMessagesKey.String(messages(message{Role: "assistant", Parts: []part{{Type: "text", Content: res.Answer}}, FinishReason: "stop"})))
		root.SetStatus(codes.Error, err.Error())
		return res
	}
	doc := dataSource + "/" + q.op + ".md"

	// Look up the formula.
	_, retr := tr.Start(ctx, "retrieval "+dataSource, trace.WithTimestamp(ms(20)), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			otelsemconv.GenAIOperationNameRetrieval,
			otelsemconv.GenAIDataSourceID(dataSource),
			otelsemconv.GenAIRetrievalQueryText(q.op+" of a list"),
			otelsemconv.GenAIRequestTopK(1),
		))
	retr.SetAttributes(otelsemconv.GenAIRetrievalDocumentsKey.String(fmt.Sprintf(`[{"id":%q,"score":0.93}]`, doc)))
	retr.End(trace.WithTimestamp(ms(60)))

	// The first model call asks for the calculator.
	args, _ := json.Marshal(map[string]any{"op": q.op, "values": q.values})
	callID := "call_" + t.CaseID + "_" + strconv.Itoa(trial)
	in1 := []message{
		{Role: "system", Parts: []part{{Type: "text", Content: systemPrompt}}},
		{Role: "user", Parts: []part{{Type: "text", Content: t.Task}}},
	}
	out1 := message{Role: "assistant", Parts: []part{{Type: "tool_call", ID: callID, Name: toolName, Arguments: json.RawMessage(args)}}, FinishReason: "tool_call"}
	chat(ctx, tr, ms(80), in1, out1, 1)

	// The tool computes the exact value.
	value := q.compute()
	result := strconv.FormatFloat(value, 'f', -1, 64)
	_, tool := tr.Start(ctx, "execute_tool "+toolName, trace.WithTimestamp(ms(700)), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			otelsemconv.GenAIOperationNameExecuteTool,
			otelsemconv.GenAIToolName(toolName),
			otelsemconv.GenAIToolTypeKey.String("function"),
			otelsemconv.GenAIToolCallID(callID),
			otelsemconv.GenAIToolCallArgumentsKey.String(string(args)),
		))
	tool.SetAttributes(otelsemconv.GenAIToolCallResultKey.String(result))
	tool.End(trace.WithTimestamp(ms(715)))

	// The second model call writes the answer, rounded.
	res.Answer = fmt.Sprintf("The %s is %s.", q.name, round(value, opt.Precision))
	in2 := append(in1, out1, message{Role: "tool", Parts: []part{{Type: "tool_call_response", ID: callID, Result: result}}})
	out2 := message{Role: "assistant", Parts: []part{{Type: "text", Content: res.Answer}}, FinishReason: "stop"}
	chat(ctx, tr, ms(740), in2, out2, 2)

	root.SetAttributes(
		otelsemconv.GenAIOutputMessagesKey.String(messages(out2)),
		attribute.StringSlice(keyCitations, []string{doc}),
	)
	return res
}

// chat records one model call: its messages, its (deterministic) usage
// and latency.
func chat(ctx context.Context, tr trace.Tracer, start time.Time, in []message, out message, n int) {
	inText, outText := messages(in...), messages(out)
	inTok, outTok := tokens(inText), tokens(outText)
	_, span := tr.Start(ctx, "chat "+requestModel, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			otelsemconv.GenAIOperationNameChat,
			otelsemconv.GenAIProviderNameKey.String(provider),
			otelsemconv.GenAIRequestModel(requestModel),
			otelsemconv.GenAIRequestTemperature(0),
			attribute.String(keyModelLabel, "scripted"),
			otelsemconv.GenAIInputMessagesKey.String(inText),
		))
	span.SetAttributes(
		otelsemconv.GenAIResponseModel(responseModel),
		otelsemconv.GenAIResponseID(fmt.Sprintf("toy-%s-%d", span.SpanContext().SpanID(), n)),
		otelsemconv.GenAIResponseFinishReasons(out.FinishReason),
		otelsemconv.GenAIUsageInputTokens(inTok),
		otelsemconv.GenAIUsageOutputTokens(outTok),
		otelsemconv.GenAIOutputMessagesKey.String(outText),
	)
	// Latency: 300 ms plus 4 ms an output token, as a slow model.
	span.End(trace.WithTimestamp(start.Add(time.Duration(300+4*outTok) * time.Millisecond)))
}

// tokens estimates a text's tokens as 4 bytes each, the usual rule of
// thumb: deterministic, and in proportion to what is sent.
func tokens(s string) int { return (len(s) + 3) / 4 }

// message and part are the GenAI convention's message JSON
// (gen-ai-input-messages.json, gen-ai-output-messages.json).
type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    string          `json:"result,omitempty"`
}

func messages(ms ...message) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(ms) // plain structs: cannot fail
	return strings.TrimSpace(b.String())
}

// question is what the toy read out of a task.
type question struct {
	op     string // mean, sum, median, max, min
	name   string // how the answer names it
	values []float64
}

var (
	numberRe = regexp.MustCompile(`-?\d+(?:\.\d+)?`)
	opWords  = []struct{ word, op, name string }{
		{"mean", "mean", "mean"}, {"average", "mean", "mean"},
		{"sum", "sum", "sum"}, {"total", "sum", "sum"},
		{"median", "median", "median"},
		{"maximum", "max", "maximum"}, {"largest", "max", "maximum"},
		{"minimum", "min", "minimum"}, {"smallest", "min", "minimum"},
	}
)

// parse reads the operation (a keyword) and the numbers of a question.
func parse(task string) (question, error) {
	lower := strings.ToLower(task)
	var q question
	for _, w := range opWords {
		if strings.Contains(lower, w.word) {
			q.op, q.name = w.op, w.name
			break
		}
	}
	if q.op == "" {
		return q, fmt.Errorf("no operation in %q", task)
	}
	for _, s := range numberRe.FindAllString(task, -1) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return q, fmt.Errorf("number %q: %w", s, err)
		}
		q.values = append(q.values, v)
	}
	if len(q.values) == 0 {
		return q, errors.New("no numbers in the question")
	}
	return q, nil
}

// compute is the calculator tool.
func (q question) compute() float64 {
	v := q.values
	switch q.op {
	case "sum", "mean":
		s := 0.0
		for _, x := range v {
			s += x
		}
		if q.op == "mean" {
			return s / float64(len(v))
		}
		return s
	case "median":
		// The toy's deliberate bug: it takes the middle of the list as
		// given, without sorting it first. Right when the list happens to
		// be sorted; wrong otherwise, which a grader must catch.
		return v[len(v)/2]
	case "max":
		return slices.Max(v)
	case "min":
		return slices.Min(v)
	}
	return math.NaN()
}

// round writes v with at most prec decimals, trailing zeros dropped.
func round(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
