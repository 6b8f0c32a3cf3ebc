package clickhouse

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomwork/loomwork/store"
)

// Search (store.TraceQuery.Search and Session) is answered from the spans
// table itself: each clause becomes "trace_id IN (spans satisfying it)".
// Attributes are the stored store.Attributes JSON, so a clause extracts the
// key's raw JSON value once per span (after a cheap substring test for the
// key as it is spelled in that JSON) and compares it by JSON type, which
// keeps the int/double/bool/string distinction the contract needs.

// numTypes are the JSON types of numbers as JSONType names them.
const numTypes = "('Int64', 'UInt64', 'Double')"

// scalarEq is the equality of a raw JSON scalar %[1]s with the clause's
// value, as text and, for a number, as a number (see store.SearchClause).
func scalarEq(x string, c store.SearchClause) (string, []any) {
	cond := fmt.Sprintf("(JSONType(%[1]s) = 'String' AND JSONExtractString(%[1]s) = ?) OR (JSONType(%[1]s) = 'Bool' AND if(JSONExtractBool(%[1]s), 'true', 'false') = ?)", x)
	args := []any{c.Value, c.Value}
	if c.IsNum {
		cond += fmt.Sprintf(" OR (JSONType(%[1]s) IN %[2]s AND JSONExtractFloat(%[1]s) = ?)", x, numTypes)
		args = append(args, c.Num)
	}
	return "(" + cond + ")", args
}

// scalarCmp is an order comparison of a raw JSON number with the clause's.
func scalarCmp(x string, c store.SearchClause) (string, []any) {
	op := map[store.SearchOp]string{store.OpGt: ">", store.OpGe: ">=", store.OpLt: "<", store.OpLe: "<="}[c.Op]
	return fmt.Sprintf("(JSONType(%[1]s) IN %[2]s AND JSONExtractFloat(%[1]s) %[3]s ?)", x, numTypes, op), []any{c.Num}
}

// valueMatch is the clause's test of a raw attribute value: the value
// itself, or any element of an array.
func valueMatch(c store.SearchClause, eq bool) (string, []any) {
	scalar := scalarCmp
	if eq {
		scalar = scalarEq
	}
	a, aArgs := scalar("raw", c)
	b, bArgs := scalar("e", c)
	return fmt.Sprintf("(%s OR (JSONType(raw) = 'Array' AND arrayExists(e -> %s, JSONExtractArrayRaw(raw))))", a, b), append(aArgs, bArgs...)
}

// searchConds returns conditions on spans (each "trace_id IN (...)" or
// NOT IN) for q's search clauses and session, with their arguments. from
// is a condition on spans every subquery adds (with fromArgs): the
// project's (projectCond), and maybe a time bound no span of a matching
// trace is outside of.
func (s *Store) searchConds(q *store.TraceQuery, from string, fromArgs []any) ([]string, []any) {
	var conds []string
	var args []any
	sub := func(not bool, cond string, a ...any) {
		op := "trace_id IN"
		if not {
			op = "trace_id NOT IN"
		}
		if from != "" {
			cond += " AND " + from
			a = append(a, fromArgs...)
		}
		conds = append(conds, op+" (SELECT trace_id FROM "+s.spansTable+" WHERE "+cond+")")
		args = append(args, a...)
	}
	// attr selects spans with the key whose raw value satisfies test.
	attr := func(not bool, c store.SearchClause, test string, testArgs []any) {
		jsonKey := string(store.AppendJSONString(nil, c.Key)) + ":"
		// A substring test before parsing any JSON: the key as the stored
		// JSON spells it and, for a value that can only equal a string,
		// the key followed by that string's JSON (or by an array).
		pre := "position(attributes, ?) > 0"
		preArgs := []any{jsonKey}
		stringOnly := test != "" && c.Op != store.OpGt && c.Op != store.OpGe && c.Op != store.OpLt && c.Op != store.OpLe &&
			!c.IsNum && c.Value != "true" && c.Value != "false"
		if stringOnly {
			pre = "(position(attributes, ?) > 0 OR position(attributes, ?) > 0)"
			preArgs = []any{jsonKey + string(store.AppendJSONString(nil, c.Value)), jsonKey + "["}
		}
		// An attribute a typed column holds (bit set in
		// attributes_in_columns, typedattrs.go) is not in the JSON: its
		// raw value is the column's value as JSON. When only a string can
		// match, a string column is compared directly.
		rawExpr := "JSONExtractRaw(attributes, ?)"
		if bit, ok := typedAttrKey(c.Key); ok {
			ta := &typedAttrs[bit]
			colJSON := "toJSONString(toString(" + ta.column + "))"
			switch ta.kind {
			case attrInt:
				colJSON = "toString(" + ta.column + ")"
			case attrStrings:
				colJSON = "toJSONString(" + ta.column + ")"
			}
			in := fmt.Sprintf("bitTest(attributes_in_columns, %d)", bit)
			rawExpr = "if(" + in + ", " + colJSON + ", " + rawExpr + ")"
			if stringOnly && ta.kind == attrString {
				pre = "((" + in + " AND " + ta.column + " = ?) OR " + pre + ")"
				preArgs = append([]any{c.Value}, preArgs...)
			} else {
				pre = "(" + in + " OR " + pre + ")"
			}
		}
		a := append([]any{c.Key}, preArgs...)
		inner := "trace_id IN (SELECT trace_id FROM (SELECT trace_id, " + rawExpr + " AS raw FROM " + s.spansTable +
			" WHERE " + pre
		if from != "" {
			inner += " AND " + from
			a = append(a, fromArgs...)
		}
		inner += ") WHERE raw != ''"
		if test != "" {
			inner += " AND " + test
			a = append(a, testArgs...)
		}
		inner += ")"
		if not {
			inner = "NOT " + inner
		}
		conds = append(conds, inner)
		args = append(args, a...)
	}
	if q.Session != "" {
		sub(false, "conversation_id = ?", q.Session)
	}
	for _, c := range q.Search {
		switch c.Field {
		case store.FieldName:
			sub(false, "name = ?", c.Value)
		case store.FieldRetrieved:
			sub(false, "has(retrieved_docs, ?)", c.Value)
		case store.FieldCited:
			sub(false, "has(cited_docs, ?)", c.Value)
		case store.FieldEvidence:
			sub(false, "(has(retrieved_docs, ?) OR has(cited_docs, ?))", c.Value, c.Value)
		case store.FieldAttr:
			switch c.Op {
			case store.OpExists:
				attr(false, c, "", nil)
			case store.OpEq:
				test, a := valueMatch(c, true)
				attr(false, c, test, a)
			case store.OpNe:
				attr(false, c, "", nil)
				test, a := valueMatch(c, true)
				attr(true, c, test, a)
			default:
				test, a := valueMatch(c, false)
				attr(false, c, test, a)
			}
		}
	}
	return conds, args
}

// ListSessions returns one page of sessions (see store.SessionLister),
// from the summaries kept at ingest: each trace's row lists its sessions
// (conversation ids), so a session's figures are store.SumTurns over its
// turns' rows, the ones ListTraces returns, grouped in SQL and ordered by
// the latest turn's start.
func (s *Store) ListSessions(ctx context.Context, q store.SessionQuery) (store.SessionPage, error) {
	if err := s.usable(); err != nil {
		return store.SessionPage{}, err
	}
	p, err := q.Plan()
	if err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	pc, err := projectCond(ctx)
	if err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	var b strings.Builder
	b.WriteString(`SELECT session, toInt64(count()), min(start), max(start), toInt64(max(toUnixTimestamp64Nano(start))) AS last_ns,
	sum(span_count), sum(error_count), sum(model_calls), sum(tool_calls), sum(input_tokens), sum(output_tokens)
	FROM (SELECT sessions, start, span_count, error_count, model_calls, tool_calls, input_tokens, output_tokens FROM `)
	b.WriteString(s.summaryTable)
	b.WriteString(" FINAL WHERE " + pc + " AND notEmpty(sessions)) ARRAY JOIN sessions AS session GROUP BY session")
	var args []any
	if p.After != nil {
		b.WriteString(" HAVING (last_ns, session) < (?, ?)")
		args = append(args, p.After.LastStartNS, p.After.SessionID)
	}
	fmt.Fprintf(&b, " ORDER BY last_ns DESC, session DESC LIMIT %d", p.Limit+1)
	rows, err := s.query(ctx, b.String(), args...)
	if err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	page := store.SessionPage{Sessions: []store.SessionSummary{}}
	for rows.Next() {
		var ss store.SessionSummary
		var last int64
		if err := rows.Scan(&ss.SessionID, &ss.Turns, &ss.FirstStart, &ss.LastStart, &last, &ss.SpanCount, &ss.ErrorCount,
			&ss.ModelCalls, &ss.ToolCalls, &ss.InputTokens, &ss.OutputTokens); err != nil {
			return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
		}
		ss.FirstStart, ss.LastStart = ss.FirstStart.UTC(), ss.LastStart.UTC()
		page.Sessions = append(page.Sessions, ss)
	}
	if err := rows.Err(); err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	if len(page.Sessions) > p.Limit {
		page.Sessions = page.Sessions[:p.Limit]
		last := page.Sessions[len(page.Sessions)-1]
		page.NextPageToken = p.NextPageToken(store.SessionPosition{LastStartNS: last.LastStart.UnixNano(), SessionID: last.SessionID})
	}
	return page, nil
}

var _ store.SessionLister = (*Store)(nil)
