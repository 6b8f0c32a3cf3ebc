package web

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/a-h/templ"
)

// authCookie holds a sign-in session's id: a random value that names a
// session held here, never the token itself (a cookie is sent on every
// request and stored by the browser; the token must not be).
const authCookie = "loomwork_auth"

// DefaultSessionTTL is how long a browser sign-in lasts (Config.SessionTTL).
const DefaultSessionTTL = 12 * time.Hour

// loginSession is what a session id maps to: the token or key presented at
// sign-in (checked again on every request, so a revoked key stops working
// at once) and when the session ends.
type loginSession struct {
	token   string
	expires time.Time
}

// sessions is the server-side table of sign-in sessions. It lives in
// memory: a restart signs everyone out, which costs a sign-in.
type sessions struct {
	mu  sync.Mutex
	ttl time.Duration
	now func() time.Time
	m   map[string]loginSession
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, m: map[string]loginSession{}}
}

// create starts a session for token and returns its id (32 random bytes).
func (s *sessions) create(token string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	id := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, v := range s.m { // drop expired sessions as new ones come
		if !now.Before(v.expires) {
			delete(s.m, k)
		}
	}
	s.m[id] = loginSession{token: token, expires: now.Add(s.ttl)}
	return id
}

// token returns the token of a live session.
func (s *sessions) token(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if !ok {
		return "", false
	}
	if !s.now().Before(v.expires) {
		delete(s.m, id)
		return "", false
	}
	return v.token, true
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// loginForm serves the sign-in form. A token in the URL is refused, not
// used: it would already be in the browser's history and the server's and
// proxies' logs, and travel in Referer headers.
func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AuthToken == "" && s.cfg.Keys == nil {
		http.Redirect(w, r, "/traces", http.StatusFound)
		return
	}
	if r.URL.Query().Has("token") {
		w.Header().Set("Cache-Control", "no-store")
		renderStatus(w, r, http.StatusBadRequest, LoginPage("A token in the URL is not accepted (history, logs and Referer headers keep URLs): enter it here; it is sent in the form's body."))
		return
	}
	render(w, r, LoginPage(""))
}

// loginPost signs in with the token in the POST body (never the URL's
// query) and sets a cookie holding a new session's id.
func (s *Server) loginPost(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AuthToken == "" && s.cfg.Keys == nil {
		http.Redirect(w, r, "/traces", http.StatusSeeOther)
		return
	}
	// Login CSRF: another site must not sign a browser in as itself.
	if err := s.csrf.origin.Check(r); err != nil {
		http.Error(w, "forbidden: sign-in from another origin", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if r.URL.Query().Has("token") {
		http.Error(w, "bad request: send the token in the POST body (token=…), not in the URL", http.StatusBadRequest)
		return
	}
	tok := r.PostForm.Get("token")
	if !s.check(tok).ok {
		renderStatus(w, r, http.StatusUnauthorized, LoginPage("Wrong or missing token."))
		return
	}
	id := s.sessions.create(tok)
	http.SetCookie(w, &http.Cookie{Name: authCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(s.cfg.SessionTTL / time.Second)})
	http.Redirect(w, r, "/traces", http.StatusSeeOther)
}

// logout ends the session and clears its cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if err := s.csrf.origin.Check(r); err != nil {
		http.Error(w, "forbidden: sign-out from another origin", http.StatusForbidden)
		return
	}
	if c, err := r.Cookie(authCookie); err == nil {
		s.sessions.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: authCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// renderStatus renders c with an error status (render writes 200).
func renderStatus(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var b bytes.Buffer
	if err := c.Render(r.Context(), &b); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
