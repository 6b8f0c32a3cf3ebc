package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/semconv"
)

// TestServeLabelsFormWritesWhatLabelsAgreementReads runs serve with
// --labels and an auth token, signs in as a browser does, labels a trial
// through the form, and reads the file back with `labels agreement`: the
// UI and the CLI share one format and one writer. A POST without the
// form's CSRF token is refused and writes nothing.
func TestServeLabelsFormWritesWhatLabelsAgreementReads(t *testing.T) {
	dir := t.TempDir()
	trials := writeGradedTrials(t, dir, []bool{true, false})
	labels := filepath.Join(dir, "labels.jsonl")
	const token = "s3cret-token-for-the-labels-test"
	r, _, stop := startServe(t, nil, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--ui-addr", "127.0.0.1:0",
		"--auth-token", token, "--labels", labels)
	base := "http://" + r.UIAddr

	// A trace to label, sent over OTLP/HTTP JSON: its root says it is
	// trial 1 of case c1.
	const traceID = "5b8efff798038103d269b633813fc60c"
	otlp := fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"support-bot"}}]},
		"scopeSpans":[{"scope":{"name":"test"},"spans":[{"traceId":%q,"spanId":"eee19b7ec3c1b174","name":"invoke_agent support","kind":1,
		"startTimeUnixNano":"1767261600000000000","endTimeUnixNano":"1767261601000000000",
		"attributes":[{"key":%q,"value":{"stringValue":"invoke_agent"}},{"key":%q,"value":{"stringValue":"c1"}},{"key":%q,"value":{"intValue":"1"}}]}]}]}]}`,
		traceID, semconv.AttrOperationName, semconv.AttrCaseID, semconv.AttrTrial)
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.HTTPAddr+"/v1/traces", strings.NewReader(otlp))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		t.Fatalf("OTLP export: %d %s", resp.StatusCode, b)
	}
	resp.Body.Close()

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/labels/new?trace=0"); code != http.StatusUnauthorized {
		t.Fatalf("the label form without signing in: %d, want 401", code)
	}
	if resp, err := c.PostForm(base+"/login", url.Values{"token": {token}}); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %v %v", resp, err)
	}
	code, form := get("/labels/new?trace=" + traceID[:8])
	if code != 200 || !strings.Contains(form, `name="case_id" value="c1" readonly`) || !strings.Contains(form, `name="trial" value="1"`) {
		t.Fatalf("label form: %d\n%s", code, form)
	}
	m := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(form)
	if m == nil {
		t.Fatal("the form carries no CSRF token")
	}
	post := func(vals url.Values) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/labels", strings.NewReader(vals.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	label := url.Values{"case_id": {"c1"}, "trial": {"1"}, "grader": {"helpful"}, "verdict": {"pass"}, "labeler": {"ana"}, "note": {"the answer is right; the judge missed it"}}
	if code := post(label); code != http.StatusForbidden {
		t.Fatalf("POST without the CSRF token: %d, want 403", code)
	}
	if _, err := os.Stat(labels); !os.IsNotExist(err) {
		t.Fatalf("a refused POST created the labels file: %v", err)
	}
	label.Set("csrf_token", m[1])
	if code := post(label); code != http.StatusSeeOther {
		t.Fatalf("POST with the token: %d, want 303", code)
	}
	if code := post(label); code != http.StatusConflict {
		t.Fatalf("the same label again: %d, want 409", code)
	}

	// The export is the file, and `labels agreement` reads it.
	code, export := get("/labels/export.jsonl")
	want := `{"case_id":"c1","trial":1,"grader":"helpful","passed":true,"labeler":"ana","note":"the answer is right; the judge missed it"}` + "\n"
	if code != 200 || export != want {
		t.Fatalf("export: %d %q\nwant %q", code, export, want)
	}
	agree, errOut, exit := labelsCLI(t, "labels", "agreement", "--labels", labels, trials, "--format", "json")
	if exit != ExitOK {
		t.Fatalf("labels agreement on the UI's file: exit %d: %s", exit, errOut)
	}
	var rep labelsAgreementReport
	if err := json.Unmarshal([]byte(agree), &rep); err != nil || rep.NLabels != 1 || len(rep.Graders) != 1 || rep.Graders[0].Confusion.HumanOnly != 1 {
		t.Fatalf("agreement: %v\n%s", err, agree)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
