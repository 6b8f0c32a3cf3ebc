package semconv

import "strings"

// OpenInferenceToolParameters is a tool's parameters (JSON text): content
// when the project does not capture it.
const OpenInferenceToolParameters = "tool.parameters"

// contentKeys are the attributes that carry captured content: messages,
// instructions, tool arguments and results, inputs and outputs.
var contentKeys = map[string]bool{
	AttrInputMessages:           true,
	AttrOutputMessages:          true,
	AttrSystemInstructions:      true,
	AttrToolCallArguments:       true,
	AttrToolCallResult:          true,
	OpenInferenceInputValue:     true,
	OpenInferenceOutputValue:    true,
	OpenInferenceToolParameters: true,
}

var contentPrefixes = []string{AttrPromptPrefix, AttrCompletionPrefix,
	OpenInferenceInputMessagesPrefix, OpenInferenceOutputMessagesPrefix}

// IsContentKey reports whether an attribute key carries captured content
// (what a project that does not capture content must not store).
func IsContentKey(key string) bool {
	if contentKeys[key] {
		return true
	}
	for _, p := range contentPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
