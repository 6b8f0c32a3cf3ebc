// Package pdataref is the reference the direct protobuf decoder of package
// genai is checked against: genai's mapping as it was when it read the
// Collector's pdata (ptraceotlp.ExportRequest.UnmarshalProto, then a walk
// of ptrace.Traces). It is kept verbatim, apart from its package name, and
// only tests import it: the differential fuzz test decodes every input both
// ways and requires the same spans, the same rejections and the same
// accept-or-refuse verdict.
package pdataref
