// Package options is how seqd's command line reads its configuration:
// every key can come from a TOML file (--config), an environment variable
// (SEQD_ + the key in upper case, dots and dashes as underscores) or a
// flag (--key); a flag beats the environment, which beats the file, which
// beats the default. The TOML key of "udp.stream-group" is stream-group
// in table [udp]. A key the flags do not know is refused, not ignored.
//
// It also reports configuration errors on the key a user sets (KeyError,
// Keyed: "invalid configuration: node.mode = \"turbo\", want one of: safe,
// fast (flag --node.mode, variable SEQD_NODE_MODE)"), reads the fault
// injection of drills from SEQD_FAULTS (FaultsFromEnv), and makes the
// process's logger (NewLogger).
//
// Main entry points: String, Int, Uint, Bool, Duration (flags of a key),
// WithConfig (adds --config and loads it), KeyError, OneOf, Keyed.
//
// Concurrency: the functions keep no state; they run while a command
// starts.
package options
