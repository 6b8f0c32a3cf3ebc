package research

import "encoding/json"

// DecodeAttributesForTest exposes decodeAttributes to the fuzz target.
func DecodeAttributesForTest(raw json.RawMessage) (Attributes, error) { return decodeAttributes(raw) }
