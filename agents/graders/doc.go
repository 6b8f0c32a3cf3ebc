// Package graders holds the backends of scorer/grade's interfaces that
// need the agents' machinery: Sandbox runs code graders in the sandbox
// (grade.CodeRunner), and the gateway judge answers model graders through
// agents/gateway (grade.Judge). The scorer itself does no I/O; the binary
// and the CI recipe wire these in.
package graders
