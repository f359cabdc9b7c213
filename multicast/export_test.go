package multicast

// Exported for the external tests in package multicast_test.
var (
	SendFromPortZero = sendFromPortZero
	TestConfig       = testConfig
)
