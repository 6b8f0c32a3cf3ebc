package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Experiments. An experiment (`loom-eval experiment run`: a user's agent
// run over a case file, cases × trials) is kept in the trace store next to
// the traces of its trials, so the UI and `experiment list|show|compare
// --store` find it wherever the store is read. The store does not know the
// experiment's format (datasets.Experiment and datasets.Trial are above
// it): it keeps each record and each trial as an opaque JSON document and
// indexes the few fields it lists and filters by. datasets converts both
// ways.
//
// Experiments belong to a project like traces do: PutExperiment writes
// under ProjectOf(ctx), and every read sees only ProjectOf(ctx)'s
// experiments. An experiment id is unique within a project.

// ErrExperimentNotFound is wrapped by GetExperiment's error for an id the
// store does not hold (in the context's project).
var ErrExperimentNotFound = errors.New("experiment not found")

// ErrBadExperiment is wrapped by PutExperiment's error for a document that
// cannot be stored (no id, a record or trial that is not a JSON object, a
// trial of another experiment); nothing is stored then.
var ErrBadExperiment = errors.New("invalid experiment document")

// StoredExperiment is an experiment's record as a store keeps it: the
// indexed fields (copied from the record by whoever writes it) and the
// documents themselves.
type StoredExperiment struct {
	ID      string    `json:"id"`
	Name    string    `json:"name,omitempty"`
	Created time.Time `json:"created"`
	// Label is the agent's version label; DatasetSHA256 the digest of the
	// case file; Status the record's status (running, complete,
	// incomplete).
	Label         string `json:"label,omitempty"`
	DatasetSHA256 string `json:"dataset_sha256"`
	Status        string `json:"status"`
	// Updated is when this version of the record was written (the store
	// sets it); a later PutExperiment replaces the record.
	Updated time.Time `json:"updated"`
	// Record is the experiment record (a datasets.Experiment), a JSON
	// object.
	Record json.RawMessage `json:"record"`
	// Dataset is the case file the experiment ran (a
	// datasets.ExperimentCaseFile), a JSON object or nil; the list does
	// not return it.
	Dataset json.RawMessage `json:"dataset,omitempty"`
}

// StoredTrial is one graded trial of an experiment: its key, its trace id
// and the trial (a datasets.Trial) as a JSON object.
type StoredTrial struct {
	CaseID  string          `json:"case_id"`
	Trial   int             `json:"trial"`
	TraceID string          `json:"trace_id,omitempty"`
	Doc     json.RawMessage `json:"doc"`
}

// ExperimentWriter is an optional capability of a Store: keeping
// experiments. Find it with a type assertion (both backends implement it;
// the conformance suite checks it).
//
// PutExperiment stores e under ProjectOf(ctx), replacing the record stored
// under e.ID (if any), and stores trials, each replacing a stored trial of
// the same (CaseID, Trial): a resumed experiment's trials are only ever
// added, so putting it again after every run keeps it whole, and a retried
// put changes nothing. It returns nil only once everything is durably
// stored; on error the caller may retry the whole put. Updated is set by the
// store.
type ExperimentWriter interface {
	PutExperiment(ctx context.Context, e StoredExperiment, trials []StoredTrial) error
}

// ExperimentReader is the reading half of ExperimentWriter.
type ExperimentReader interface {
	// ListExperiments returns one page of ProjectOf(ctx)'s experiments,
	// newest Created first (ties by id, descending), without their
	// Dataset document.
	ListExperiments(ctx context.Context, q ExperimentQuery) (ExperimentPage, error)
	// GetExperiment returns an experiment (with its Dataset document) and
	// its trials ordered by CaseID then Trial, or an error wrapping
	// ErrExperimentNotFound.
	GetExperiment(ctx context.Context, id string) (StoredExperiment, []StoredTrial, error)
}

// ExperimentStore is both halves.
type ExperimentStore interface {
	ExperimentWriter
	ExperimentReader
}

// ExperimentQuery filters and pages the experiment list. The zero value
// lists the newest DefaultPageSize experiments.
type ExperimentQuery struct {
	// Label and DatasetSHA256, when set, match exactly.
	Label         string
	DatasetSHA256 string
	// Limit is the page size (DefaultPageSize when 0, at most
	// MaxPageSize); PageToken the previous page's NextPageToken.
	Limit     int
	PageToken string
}

// ExperimentPage is one page of experiments. NextPageToken is "" on the
// last page.
type ExperimentPage struct {
	Experiments   []StoredExperiment `json:"experiments"`
	NextPageToken string             `json:"next_page_token,omitempty"`
}

// PageSize is the query's page size after defaults and clamping.
func (q ExperimentQuery) PageSize() int {
	switch {
	case q.Limit <= 0:
		return DefaultPageSize
	case q.Limit > MaxPageSize:
		return MaxPageSize
	}
	return q.Limit
}

// ExperimentCursor is the keyset position a page token stands for: the
// last experiment of the previous page. Backends list experiments with
// (Created, ID) below it, in that order.
type ExperimentCursor struct {
	Created time.Time
	ID      string
}

// ParseExperimentPageToken decodes a NextPageToken ("" is the first page:
// ok is false). Its error names the token and wraps ErrBadExperimentQuery.
func ParseExperimentPageToken(tok string) (cur ExperimentCursor, ok bool, err error) {
	if tok == "" {
		return cur, false, nil
	}
	bad := fmt.Errorf("%w: page token %s: pass back next_page_token unchanged", ErrBadExperimentQuery, quoteInput(tok))
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return cur, false, bad
	}
	ns, id, found := strings.Cut(string(b), "\x00")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !found || err != nil || id == "" {
		return cur, false, bad
	}
	return ExperimentCursor{Created: time.Unix(0, n).UTC(), ID: id}, true, nil
}

// ExperimentPageToken is the token of the page after the one ending with e.
func ExperimentPageToken(e StoredExperiment) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(e.Created.UnixNano(), 10) + "\x00" + e.ID))
}

// ErrBadExperimentQuery is wrapped by ListExperiments' error for a
// malformed query (a page token it did not issue).
var ErrBadExperimentQuery = errors.New("invalid experiment query")

// MaxExperimentIDLen bounds an experiment id.
const MaxExperimentIDLen = 200

// CheckExperiment checks what PutExperiment requires, so every backend
// refuses the same documents the same way; the error wraps
// ErrBadExperiment and names the field.
func CheckExperiment(e StoredExperiment, trials []StoredTrial) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrBadExperiment, quoteInput(e.ID), fmt.Sprintf(format, args...))
	}
	switch {
	case e.ID == "":
		return fmt.Errorf("%w: id is empty", ErrBadExperiment)
	case len(e.ID) > MaxExperimentIDLen:
		return bad("id is %d bytes, more than %d", len(e.ID), MaxExperimentIDLen)
	case e.Created.IsZero():
		return bad("created is not set")
	case !isObject(e.Record):
		return bad("record is not a JSON object")
	case len(e.Dataset) > 0 && !isObject(e.Dataset):
		return bad("dataset is not a JSON object")
	}
	if _, err := unixNanosOf(e.Created); err != nil {
		return bad("created: %v", err)
	}
	seen := map[string]bool{}
	for i, t := range trials {
		k := t.CaseID + "\x00" + strconv.Itoa(t.Trial)
		switch {
		case t.CaseID == "":
			return bad("trials[%d]: case_id is empty", i)
		case t.Trial < 0:
			return bad("trials[%d] (case %q): trial %d is negative", i, t.CaseID, t.Trial)
		case seen[k]:
			return bad("trials[%d]: trial %d of case %q appears twice", i, t.Trial, t.CaseID)
		case !isObject(t.Doc):
			return bad("trials[%d] (case %q, trial %d): doc is not a JSON object", i, t.CaseID, t.Trial)
		}
		seen[k] = true
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return len(b) > 0 && json.Unmarshal(b, &m) == nil && m != nil
}

// unixNanosOf is t in Unix nanoseconds, for the years every backend's
// columns hold (an int64 of nanoseconds, ClickHouse's DateTime64(9)).
func unixNanosOf(t time.Time) (int64, error) {
	if t.Year() < 1900 || t.Year() > 2261 {
		return 0, fmt.Errorf("%s is outside 1900–2261", t.Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}
