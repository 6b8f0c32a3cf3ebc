package web

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoginIsAPostAndTheCookieIsASession: a token in the URL signs no one
// in (400, no cookie, saying why); the form POSTs it in the body; the
// cookie then holds a random session id, not the token, which works until
// logout or expiry, and stops working when the key is revoked.
func TestLoginIsAPostAndTheCookieIsASession(t *testing.T) {
	st, _ := seeded(t)
	const token = "s3cret-token-for-login-tests"
	const key = "lwk_login_test_key_0123456789abcdef"
	var revoked atomic.Bool
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	ts := newServer(t, st, Config{AuthToken: token, SessionTTL: time.Hour,
		Now: func() time.Time { return time.Unix(0, clock.Load()) },
		Keys: func(s string) (string, bool, bool) {
			if s == key && !revoked.Load() {
				return "alpha", false, true
			}
			return "", false, false
		}})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values, cookies ...*http.Cookie) *http.Response {
		t.Helper()
		var req *http.Request
		if form != nil {
			req, _ = http.NewRequest(method, ts.URL+path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			req, _ = http.NewRequest(method, ts.URL+path, nil)
		}
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	authCookieOf := func(resp *http.Response) *http.Cookie {
		for _, ck := range resp.Cookies() {
			if ck.Name == authCookie {
				return ck
			}
		}
		return nil
	}

	// The old way: GET /login?token=… signs no one in.
	code, body := get(t, ts, "/login?token="+token)
	if code != http.StatusBadRequest || !strings.Contains(body, "A token in the URL is not accepted") {
		t.Errorf("GET /login?token=…: %d, want 400 saying why:\n%.300s", code, body)
	}
	if resp := do("GET", "/login?token="+token, nil); authCookieOf(resp) != nil || len(resp.Cookies()) != 0 {
		t.Errorf("GET /login?token=… set cookies %v", resp.Cookies())
	}
	if resp := do("POST", "/login?token="+token, url.Values{}); resp.StatusCode != http.StatusBadRequest || authCookieOf(resp) != nil {
		t.Errorf("POST with the token in the URL: %d, cookie %v; want 400 and none", resp.StatusCode, authCookieOf(resp))
	}
	if code, body := get(t, ts, "/login"); code != 200 || !strings.Contains(body, `<form method="post" action="/login"`) || !strings.Contains(body, `type="password" name="token"`) {
		t.Errorf("login form: %d\n%.500s", code, body)
	}
	if resp := do("POST", "/login", url.Values{"token": {"wrong-token-wrong-token"}}); resp.StatusCode != http.StatusUnauthorized || authCookieOf(resp) != nil {
		t.Errorf("POST with a wrong token: %d, cookie %v", resp.StatusCode, authCookieOf(resp))
	}

	// The form: the token in the body, a session id in the cookie.
	resp := do("POST", "/login", url.Values{"token": {token}})
	ck := authCookieOf(resp)
	if resp.StatusCode != http.StatusSeeOther || ck == nil {
		t.Fatalf("POST /login: %d, cookie %v", resp.StatusCode, ck)
	}
	if ck.Value == token || strings.Contains(ck.Value, token) || len(ck.Value) < 40 || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.MaxAge != 3600 {
		t.Errorf("the cookie %+v must be an HttpOnly, SameSite=Strict random session id lasting the TTL, not the token", ck)
	}
	if r := do("GET", "/api/v1/traces", nil, ck); r.StatusCode != 200 {
		t.Errorf("with the session cookie: %d", r.StatusCode)
	}
	if r := do("GET", "/api/v1/traces", nil, &http.Cookie{Name: authCookie, Value: token}); r.StatusCode != 401 {
		t.Errorf("a cookie holding the raw token: %d, want 401", r.StatusCode)
	}
	if r := do("GET", "/api/v1/traces", nil, &http.Cookie{Name: "loomwork_token", Value: token}); r.StatusCode != 401 {
		t.Errorf("the old loomwork_token cookie: %d, want 401", r.StatusCode)
	}

	// Logout ends the session server-side and clears the cookie.
	out := do("POST", "/logout", url.Values{}, ck)
	if cleared := authCookieOf(out); out.StatusCode != http.StatusSeeOther || cleared == nil || cleared.MaxAge >= 0 || cleared.Value != "" {
		t.Errorf("logout: %d, cookie %+v; want it cleared", out.StatusCode, cleared)
	}
	if r := do("GET", "/api/v1/traces", nil, ck); r.StatusCode != 401 {
		t.Errorf("the session after logout: %d, want 401", r.StatusCode)
	}

	// Expiry.
	ck = authCookieOf(do("POST", "/login", url.Values{"token": {token}}))
	clock.Add(int64(time.Hour + time.Second))
	if r := do("GET", "/api/v1/traces", nil, ck); r.StatusCode != 401 {
		t.Errorf("the session after its TTL: %d, want 401", r.StatusCode)
	}

	// A key's session ends with the key.
	ck = authCookieOf(do("POST", "/login", url.Values{"token": {key}}))
	if r := do("GET", "/api/v1/traces", nil, ck); r.StatusCode != 200 {
		t.Errorf("a key's session: %d", r.StatusCode)
	}
	revoked.Store(true)
	if r := do("GET", "/api/v1/traces", nil, ck); r.StatusCode != 401 {
		t.Errorf("a revoked key's session: %d, want 401", r.StatusCode)
	}

	// API bearer auth is unchanged.
	if code, _ := get(t, ts, "/api/v1/traces", "Authorization", "Bearer "+token); code != 200 {
		t.Errorf("bearer token: %d", code)
	}
}
