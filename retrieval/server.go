package retrieval

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// ServerConfig configures the HTTP server agents query.
type ServerConfig struct {
	// Addr is the listen address, e.g. "127.0.0.1:7411" (port 0: any free
	// port; see Server.Addr).
	Addr string
	// ReadHeaderTimeout bounds slow clients (default 10s).
	ReadHeaderTimeout time.Duration
}

// Validate reports a configuration that cannot work.
func (c ServerConfig) Validate() error {
	if c.Addr == "" {
		return errors.New("addr: must be set, e.g. 127.0.0.1:7411")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("addr: %q is not host:port: %w", c.Addr, err)
	}
	if c.ReadHeaderTimeout < 0 {
		return fmt.Errorf("read_header_timeout: must be >= 0 (got %s)", c.ReadHeaderTimeout)
	}
	return nil
}

// Server serves a Service's Handler over HTTP.
type Server struct {
	cfg  ServerConfig
	svc  *Service
	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// NewServer validates cfg (no I/O).
func NewServer(cfg ServerConfig, svc *Service) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("retrieval server config: %w", err)
	}
	if svc == nil {
		return nil, errors.New("retrieval server config: service must be set")
	}
	if cfg.ReadHeaderTimeout == 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	return &Server{cfg: cfg, svc: svc}, nil
}

// Start listens and serves in the background.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("retrieval server: already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.svc.Handler(), ReadHeaderTimeout: s.cfg.ReadHeaderTimeout}
	done := make(chan error, 1)
	s.done = done
	srv := s.srv
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	return nil
}

// Addr is the address the server listens on (after Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops accepting requests and waits for running ones. It is safe
// without Start and more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.srv, s.done = nil, nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down retrieval server: %w", err)
	}
	if err := <-done; err != nil {
		return fmt.Errorf("retrieval server: %w", err)
	}
	return nil
}
