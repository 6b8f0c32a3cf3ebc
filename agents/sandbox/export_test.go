package sandbox

// The helper's markers, for sandboxtest's check that it knows them.
const (
	HelperArg0ForTest     = helperArg0
	HelperEnvForTest      = helperEnv
	HelperEnvValueForTest = helperEnvValue
)
