// Package ctxlock is the backends' lifecycle lock: a mutex whose Lock gives
// up when its context ends, so a Shutdown waiting for a slow Start returns
// with the caller's deadline instead of blocking for ever.
package ctxlock

import "context"

// Mutex is a one-slot channel; make it with New.
type Mutex chan struct{}

// New returns an unlocked Mutex.
func New() Mutex { return make(Mutex, 1) }

// Lock takes the mutex, or returns ctx's cause once ctx ends first. A free
// mutex is taken even when ctx is already done, so a Shutdown with an
// expired context still runs when nothing holds the lock.
func (m Mutex) Lock(ctx context.Context) error {
	select {
	case m <- struct{}{}:
		return nil
	default:
	}
	select {
	case m <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Unlock releases the mutex.
func (m Mutex) Unlock() { <-m }
