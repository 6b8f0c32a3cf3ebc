package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/web"
)

// webAudit is the UI's view of a policy audit log (web.AuditSource): read
// with policy.ReadAudit and checked with policy.VerifyAuditSigned under the
// machine's key, the calls `audit verify` makes, so the page and the
// command agree.
type webAudit struct {
	file   string
	key    *policy.AuditKey // the machine's, read once (newWebAudit)
	keyErr error            // why there is none: said on the page
}

// newWebAudit is the UI's view of the audit log at file, checked with the
// machine's audit key, which it reads once rather than on every request.
func newWebAudit(file string) webAudit {
	k, err := loadAuditKey()
	return webAudit{file: file, key: k, keyErr: err}
}

func (a webAudit) ReadAudit(context.Context) (web.AuditView, error) {
	v := web.AuditView{File: a.file}
	f, err := os.Open(a.file)
	if errors.Is(err, fs.ErrNotExist) {
		v.Missing, v.Verified = true, true
		return v, nil
	}
	if err != nil {
		return v, fmt.Errorf("audit log %s: %w", a.file, err)
	}
	defer f.Close()
	entries, err := policy.ReadAudit(f, a.file)
	if err != nil {
		// A line that is not an entry: nothing after it can be trusted,
		// and the strict reader keeps none; say where.
		v.Problem = err.Error()
		return v, nil
	}
	if a.keyErr != nil {
		v.Problem = a.keyErr.Error()
	} else if verr := policy.VerifyAuditSigned(entries, a.key); verr != nil {
		v.Problem = verr.Error()
	} else {
		v.Verified = true
	}
	for _, e := range entries {
		v.Entries = append(v.Entries, auditRow(e))
	}
	return v, nil
}

// auditRow is an entry with a policy decision's summary read from its
// data (the guard's tool_call entries; other actions keep theirs as
// logged).
func auditRow(e policy.AuditEntry) web.AuditRow {
	row := web.AuditRow{Seq: e.Seq, Time: e.Time, Actor: e.Actor, Action: e.Action, Data: e.Data, Hash: e.Hash}
	var d struct {
		Tool    string `json:"tool"`
		Verdict struct {
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
		} `json:"verdict"`
	}
	if json.Unmarshal(e.Data, &d) == nil {
		row.Tool, row.Decision, row.Reason = d.Tool, d.Verdict.Decision, d.Verdict.Reason
	}
	return row
}
