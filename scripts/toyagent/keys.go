package main

// Loomwork's own attribute keys, spelled out as any agent outside
// Loomwork spells them: this program imports no Loomwork package (scripts
// are leaves), as a user's agent would not. The GenAI keys come from the
// OpenTelemetry semantic-convention package; these four are Loomwork's
// (semconv/loomwork.go documents them; internal/archtest lists this file
// as the one place outside semconv that may write them).
const (
	// keyCaseID marks the root span with the evaluation case it attempts:
	// the one attribute `loom-eval cases from-traces` needs.
	keyCaseID = "loomwork.case.id"
	// keyTrial is the run's 0-based trial number of its case (optional).
	keyTrial = "loomwork.trial"
	// keyCitations lists the evidence the answer cites.
	keyCitations = "loomwork.citations"
	// keyModelLabel says the "model" is scripted: this toy's model calls
	// are deterministic Go code, and a scripted run is labelled scripted.
	keyModelLabel = "loomwork.model.label"
)
