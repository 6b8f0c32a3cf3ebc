// Package filelock takes an exclusive advisory lock on an open file, so
// processes that read-then-append one file (the policy audit log, a labels
// file) take turns. It is flock(2) where the system has it — a lock
// belongs to the open file description, so two opens of one path contend
// even within one process — and a no-op elsewhere (Supported is false
// there: the callers then serialise within their own process only).
//
// A leaf on the standard library.
package filelock
