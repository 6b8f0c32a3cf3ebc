package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/loomwork/loomwork/store"
)

// Search (store.TraceQuery.Search and Session) becomes conditions on the
// trace's id. What trace_attrs (migration 12) answers exactly — a key is
// set, a low-cardinality typed string attribute equals a string, a typed
// integer attribute is above or below a number — is read from its one
// row per trace and insert, not from every span (attrsCond). Everything
// else is "trace_id IN (spans satisfying it)": attributes are the stored
// store.Attributes JSON, so a clause extracts the key's raw JSON value
// once per span (after a cheap substring test for the key as it is
// spelled in that JSON) and compares it by JSON type, which keeps the
// int/double/bool/string distinction the contract needs.

// searchTokens returns up to three of the longest tokens of s as
// ClickHouse's hasToken and the tokenbf_v1 index split a string (runs of
// ASCII letters and digits and of non-ASCII bytes, between any other ASCII
// byte), longest first: what a span's attribute JSON must hold to hold s.
func searchTokens(s string) []string {
	var toks []string
	start := -1
	for i := 0; i <= len(s); i++ {
		tok := i < len(s) && (s[i] >= 0x80 || 'a' <= s[i] && s[i] <= 'z' || 'A' <= s[i] && s[i] <= 'Z' || '0' <= s[i] && s[i] <= '9')
		switch {
		case tok && start < 0:
			start = i
		case !tok && start >= 0:
			toks = append(toks, s[start:i])
			start = -1
		}
	}
	slices.SortFunc(toks, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	toks = slices.Compact(toks)
	if len(toks) > 3 {
		toks = toks[:3]
	}
	return toks
}

// intTest is clause c's test of an integer column (OpEq, or an order
// comparison): the numbers compared as doubles, as the JSON test compares
// them; a value that is no number equals no integer.
func intTest(column string, c store.SearchClause) (string, []any) {
	if !c.IsNum {
		return "0", nil
	}
	op := map[store.SearchOp]string{store.OpEq: "=", store.OpNe: "=", store.OpGt: ">", store.OpGe: ">=", store.OpLt: "<", store.OpLe: "<="}[c.Op]
	return "toFloat64(" + column + ") " + op + " ?", []any{c.Num}
}

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

// versionTraceAttrs is the schema version that added trace_attrs: a
// store opened at an older one (a migration test) searches the spans.
const versionTraceAttrs = 12

// attrsOn reports whether the schema has the trace_attrs table.
func (s *Store) attrsOn() bool { return s.schema >= versionTraceAttrs }

// attrsValueColumns are the typed string attributes trace_attrs lists as
// "key=value" (key_values): low-cardinality ones. Tool call ids and
// conversation ids, one or a few per span, are searched on the spans
// through their own indexes.
var attrsValueColumns = map[string]bool{
	"operation": true, "provider": true, "request_model": true, "response_model": true, "agent_name": true, "tool_name": true,
}

// attrsIntColumns are the typed integer attributes whose least and
// greatest values trace_attrs keeps (<column>_min, <column>_max).
var attrsIntColumns = map[string]bool{
	"input_tokens": true, "output_tokens": true, "cache_read_tokens": true, "cache_creation_tokens": true, "reasoning_tokens": true,
}

// attrsCond is a subquery on trace_attrs (its rows' trace ids) answering
// "some span of the trace satisfies c" for the clauses its rows answer
// exactly: a key is set (keys); a low-cardinality typed string attribute
// equals a string (key_values); a typed integer attribute is above or
// below a number (the greatest or least value of the spans that carry
// it). ok is false for every other clause. Each is true of a trace exactly
// when it is true of one of its rows (a trace has a row per insert that
// held its spans), so the rows are never merged.
func (s *Store) attrsCond(pc string, c store.SearchClause, ta *typedAttr, exists, stringOnly bool) (string, []any, bool) {
	set := func(strs, v string) (string, []any, bool) {
		return "SELECT trace_id FROM " + s.attrsTable + " WHERE " + pc + " AND has(" + strs + ", ?)", []any{v}, true
	}
	cmp := func(column, op string) (string, []any, bool) {
		return "SELECT trace_id FROM " + s.attrsTable + " WHERE " + pc + " AND toFloat64(" + column + ") " + op + " ?", []any{c.Num}, true
	}
	switch {
	case exists:
		return set("keys", c.Key)
	case ta == nil:
		return "", nil, false
	case ta.kind == attrString && stringOnly && attrsValueColumns[ta.column]:
		return set("key_values", c.Key+"="+c.Value)
	case ta.kind == attrInt && c.IsNum && attrsIntColumns[ta.column]:
		switch c.Op {
		case store.OpGt:
			return cmp(ta.column+"_max", ">")
		case store.OpGe:
			return cmp(ta.column+"_max", ">=")
		case store.OpLt:
			return cmp(ta.column+"_min", "<")
		case store.OpLe:
			return cmp(ta.column+"_min", "<=")
		}
	}
	return "", nil, false
}

// searchConds returns conditions on spans (each "trace_id IN (...)" or
// NOT IN) for q's search clauses and session, with their arguments. from
// is a condition on spans every subquery adds (with fromArgs): the
// project's (projectCond), and maybe a time bound no span of a matching
// trace is outside of; pc is the project's alone, for trace_attrs.
func (s *Store) searchConds(q *store.TraceQuery, from string, fromArgs []any, pc string) ([]string, []any) {
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
	// attr selects spans with the key whose raw value satisfies test, in
	// two subqueries, each of which a skip index can prune: the spans
	// whose attribute JSON holds the key (idx_attr_tokens: the tokens of
	// the value or else of the key, then a substring test, before any
	// JSON is parsed), and, for a key a typed column holds (its bit set in
	// attributes_in_columns, typedattrs.go: the attribute is then not in
	// the JSON), the spans whose column holds the value. One subquery
	// reading both would read the attribute JSON of every span.
	attr := func(not bool, c store.SearchClause, test string, testArgs []any) {
		jsonKey := string(store.AppendJSONString(nil, c.Key)) + ":"
		// A value that can only equal a string: the key followed by
		// that string's JSON (or by an array) is in the JSON.
		stringOnly := test != "" && c.Op != store.OpGt && c.Op != store.OpGe && c.Op != store.OpLt && c.Op != store.OpLe &&
			!c.IsNum && c.Value != "true" && c.Value != "false"
		var toks []string
		pre := "position(attributes, ?) > 0"
		preArgs := []any{jsonKey}
		if stringOnly {
			valueJSON := string(store.AppendJSONString(nil, c.Value))
			pre = "(position(attributes, ?) > 0 OR position(attributes, ?) > 0)"
			preArgs = []any{jsonKey + valueJSON, jsonKey + "["}
			toks = searchTokens(valueJSON)
		}
		if len(toks) == 0 {
			toks = searchTokens(jsonKey)
		}
		for i := range toks {
			pre = "hasToken(attributes, ?) AND " + pre
			preArgs = append([]any{toks[len(toks)-1-i]}, preArgs...)
		}
		// The key, from attr_keys (migration 9), before the JSON is read;
		// whether it is set, from attr_keys alone.
		var jsonSub string
		var a []any
		if test == "" {
			jsonSub, a = "SELECT trace_id FROM "+s.spansTable+" WHERE has(attr_keys, ?)", []any{c.Key}
			if from != "" {
				jsonSub += " AND " + from
				a = append(a, fromArgs...)
			}
		} else {
			pre = "has(attr_keys, ?) AND " + pre
			a = append([]any{c.Key, c.Key}, preArgs...)
			jsonSub = "SELECT trace_id FROM (SELECT trace_id, JSONExtractRaw(attributes, ?) AS raw FROM " + s.spansTable + " WHERE " + pre
			if from != "" {
				jsonSub += " AND " + from
				a = append(a, fromArgs...)
			}
			jsonSub += ") WHERE raw != '' AND " + test
			a = append(a, testArgs...)
		}
		cond := "trace_id IN (" + jsonSub + ")"
		var ta *typedAttr
		if bit, ok := typedAttrKey(c.Key); ok {
			ta = &typedAttrs[bit]
		}
		// What trace_attrs answers, it answers alone (a key is set) or in
		// place of the typed column's spans (an ordered comparison of an
		// integer, a model's name); the spans whose JSON holds the key are
		// still read for a value, through the key's skip index.
		if ac, acArgs, ok := s.attrsCond(pc, c, ta, test == "", stringOnly); ok && s.attrsOn() {
			sub := "trace_id IN (" + ac + ")"
			if test == "" {
				cond, a = sub, acArgs
			} else {
				cond = "(" + cond + " OR " + sub + ")"
				a = append(a, acArgs...)
			}
		} else if ta != nil {
			bit, _ := typedAttrKey(c.Key)
			colJSON := "toJSONString(toString(" + ta.column + "))"
			switch ta.kind {
			case attrInt:
				colJSON = "toString(" + ta.column + ")"
			case attrStrings:
				colJSON = "toJSONString(" + ta.column + ")"
			}
			where := fmt.Sprintf("bitTest(attributes_in_columns, %d)", bit)
			var wa []any
			if stringOnly && ta.kind == attrString {
				where += " AND " + ta.column + " = ?"
				wa = append(wa, c.Value)
			}
			colTest, colArgs := test, testArgs
			switch {
			case ta.kind == attrInt && test != "":
				// An integer column's value is a JSON number: the test
				// is a comparison of numbers (none equals a string or
				// a boolean).
				colTest, colArgs = intTest(ta.column, c)
			case stringOnly && ta.kind == attrString:
				// The column equals the string: nothing left to test.
				colTest, colArgs = "", nil
			}
			if from != "" {
				where += " AND " + from
				wa = append(wa, fromArgs...)
			}
			colSub := "SELECT trace_id FROM (SELECT trace_id, " + colJSON + " AS raw FROM " + s.spansTable + " WHERE " + where + ")"
			if ta.kind == attrInt && colTest != "" {
				colSub = "SELECT trace_id FROM " + s.spansTable + " WHERE " + where + " AND " + colTest
				wa = append(wa, colArgs...)
			} else if colTest != "" {
				colSub += " WHERE " + colTest
				wa = append(wa, colArgs...)
			}
			cond = "(" + cond + " OR trace_id IN (" + colSub + "))"
			a = append(a, wa...)
		}
		if not {
			cond = "NOT " + cond
		}
		conds = append(conds, cond)
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
