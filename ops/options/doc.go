// Package options is how seqd's command line reads its configuration:
// every key can come from a TOML file (--config), an environment variable
// (SEQD_ + the key in upper case, dots and dashes as underscores) or a
// flag (--key); a flag beats the environment, which beats the file, which
// beats the default. The TOML key of "udp.stream-group" is stream-group
// in table [udp]. One file serves every process of a host: a key another
// subcommand knows is left to it, a key no subcommand knows is refused,
// not ignored. A key that is also a table's name (gossip and [gossip]) is
// read from the table by its alias (SectionString: gossip.seeds).
//
// It also reports configuration errors on the key a user sets (KeyError,
// Keyed: "invalid configuration: node.mode = \"turbo\", want one of: safe,
// fast (flag --node.mode, variable SEQD_NODE_MODE)"), reads the fault
// injection of drills from SEQD_FAULTS (FaultsFromEnv), makes the
// process's logger (LogFlags, NewLogger: --log-format, --log-level), and
// writes the configuration reference (Keys, Merge, WriteTOML: seqd config
// print-defaults).
//
// Main entry points: String, Int, Uint, Bool, Duration (flags of a key),
// WithConfig (adds --config and loads it), KeyError, OneOf, Keyed.
//
// Concurrency: the functions keep no state; they run while a command
// starts.
package options
