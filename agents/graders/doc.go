// Package graders holds the backends of scorer/grade's two outside
// interfaces: the sandbox that runs a case's code graders (grade.CodeRunner,
// over agents/sandbox) and the judge that answers its model and pairwise
// graders (grade.Judge, over agents/gateway and a live provider). The
// grading rules — prompts, verdict parsing, both pairwise orders — stay in
// scorer/grade; this package only makes the calls and accounts for them:
// a judge's model label, provider, response model, tokens and cost come
// back on every reply, so grades record the judge's spend apart from the
// agent's.
package graders
