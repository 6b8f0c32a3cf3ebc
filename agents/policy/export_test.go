package policy

// HashEntryForTest exposes the entry hash so a test can forge a rehashed
// edit.
func HashEntryForTest(e AuditEntry) string {
	h, _ := entryHash(e)
	return h
}
