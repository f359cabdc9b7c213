package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/wire"
)

// warnLogger is the logger the warning goes to: the process's own, in
// its --log-format and --log-level (a JSON log stays all JSON).
var warnLogger func(*cli.Context) *slog.Logger = options.NewLogger

// unauthenticated names the subcommands that run a long-lived process on
// the network: each logs one WARN line at start while it runs without
// keys (docs/security.md says what a host on the LAN can do).
var unauthenticated = map[string]bool{"sequencer": true, "replayer": true, "node": true, "tail": true}

// noAuthWarning is the line those processes log at start.
const noAuthWarning = "seqd: running WITHOUT AUTHENTICATION: any host that reaches the stream, command, NAK, peer, rewind, Raft or admin ports can forge packets and requests; see docs/security.md"

// The security.* keys: keys files (wire.ParseKeys: "ID CLASS SECRET" a
// line), written by seqd keygen.
const (
	streamKeyFile   = "security.stream-key-file"
	commandKeysFile = "security.command-keys-file"
	memberKeyFile   = "security.member-key-file"
)

// securityFlags are the keys files of a process on the stream; with none
// set it runs without authentication (and says so at start).
func securityFlags() []cli.Flag {
	return []cli.Flag{
		options.String(streamKeyFile, "", "keys file of the stream key(s) (class stream): the sequencers and replayers sign the stream with the newest, every receiver verifies; setting any security.* key turns authentication on (seqd keygen)"),
		options.String(commandKeysFile, "", "keys file of the command keys (command:ACCOUNT or command:*): a node signs its commands with its account's key (or the shared one); the sequencer holds every account's to verify"),
		options.String(memberKeyFile, "", "keys file of the sequencer members' key (class member): standby acks are signed with it and verified by the primary"),
	}
}

// authKey is where the Before hook leaves a process's *wire.Auth (nil:
// no authentication) for the transport to use.
const authKey = "seqd.auth"

// processAuth is the Auth the security.* keys of c built, or nil.
func processAuth(c *cli.Context) *wire.Auth {
	if c == nil || c.App == nil || c.App.Metadata == nil {
		return nil
	}
	a, _ := c.App.Metadata[authKey].(*wire.Auth)
	return a
}

// keyFileClass says which classes each file may hold.
var keyFileClass = map[string]wire.KeyClass{streamKeyFile: wire.KeyStream, commandKeysFile: wire.KeyCommand, memberKeyFile: wire.KeyMember}

// needKeys says which files a process needs once authentication is on.
var needKeys = map[string][]string{
	"sequencer": {streamKeyFile, commandKeysFile, memberKeyFile},
	"replayer":  {streamKeyFile},
	"node":      {streamKeyFile},
	"tail":      {streamKeyFile},
	"bridge":    {streamKeyFile},
	"logger":    {streamKeyFile},
}

// ErrKeys is wrapped by every error about the security.* keys.
var ErrKeys = errors.New("security")

// loadKeys reads the keys files named by c's security.* keys: nil keys
// when none is set. A file that is missing, unreadable, readable by
// others, malformed or holding a key of another class is an error that
// names the key and the file.
func loadKeys(c *cli.Context, process string) ([]wire.Key, error) {
	var keys []wire.Key
	set := false
	for _, f := range []string{streamKeyFile, commandKeysFile, memberKeyFile} {
		path := c.String(f)
		if path == "" {
			continue
		}
		set = true
		ks, err := readKeysFile(path, keyFileClass[f])
		if err != nil {
			return nil, fmt.Errorf("%w: --%s %q: %w", ErrKeys, f, path, err)
		}
		keys = append(keys, ks...)
	}
	if !set {
		return nil, nil
	}
	for _, f := range needKeys[process] {
		if c.String(f) == "" {
			return nil, fmt.Errorf("%w: seqd %s with authentication on needs --%s too", ErrKeys, process, f)
		}
	}
	return keys, nil
}

func readKeysFile(path string, class wire.KeyClass) ([]wire.Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("keys file is readable or writable by others (mode %04o): chmod 600 it", st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := wire.ParseKeys(string(b))
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("keys file holds no key")
	}
	for _, k := range keys {
		if k.Class != class {
			return nil, fmt.Errorf("key %d is %s, this file holds %s keys only", k.ID, k.Name(), class)
		}
	}
	return keys, nil
}

// withSecurity makes cmd load its keys before it runs, leave the Auth for
// the transport (processAuth), and, for a long-running process without
// keys, log noAuthWarning (not for --dry-run, which only prints the
// configuration).
func withSecurity(cmd *cli.Command) {
	hasKeys := false
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			hasKeys = hasKeys || n == streamKeyFile
		}
	}
	if !unauthenticated[cmd.Name] && !hasKeys {
		return
	}
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		if before != nil {
			if err := before(c); err != nil {
				return err
			}
		}
		var auth *wire.Auth
		if hasKeys {
			keys, err := loadKeys(c, cmd.Name)
			if err != nil {
				return err
			}
			if keys != nil {
				var acct wire.Account
				if cmd.Name == "node" && c.String("account") != "" {
					if acct, err = wire.ParseAccount(c.String("account")); err != nil {
						return options.KeyError("account", fmt.Sprintf("%q", c.String("account")), "1..8 printable ASCII bytes")
					}
				}
				if auth, err = wire.NewAuth(keys, acct); err != nil {
					return fmt.Errorf("%w: %w", ErrKeys, err)
				}
				if cmd.Name == "node" && !c.Bool("read-only") && auth.SigningKey(wire.KeyCommand) == 0 {
					return fmt.Errorf("%w: seqd node --account %s sends commands: --%s must hold command:%s or command:*", ErrKeys, c.String("account"), commandKeysFile, c.String("account"))
				}
				if c.App.Metadata == nil {
					c.App.Metadata = map[string]any{}
				}
				c.App.Metadata[authKey] = auth
				if !c.Bool("dry-run") {
					go reloadKeysOnHangup(c, cmd.Name, auth, warnLogger(c))
				}
			}
		}
		if auth == nil && unauthenticated[cmd.Name] && !c.Bool("dry-run") {
			warnLogger(c).Warn(noAuthWarning, "process", cmd.Name)
		}
		return nil
	}
}

// reloadKeysOnHangup reads the keys files again on every SIGHUP, until
// the process's context ends, and swaps them into auth (wire.Auth.Reload):
// a rotation without a restart. Keys that do not load, or that leave a
// class the process signs with without a key, are refused with an ERROR
// and the old keys stay.
func reloadKeysOnHangup(c *cli.Context, process string, auth *wire.Auth, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-c.Context.Done():
			return
		case <-hup:
		}
		keys, err := loadKeys(c, process)
		if err == nil && keys == nil {
			err = errors.New("no keys file is set any more")
		}
		if err == nil {
			err = auth.Reload(keys)
		}
		if err != nil {
			log.Error("security: keys NOT reloaded (SIGHUP); the old keys stay", "process", process, "err", err)
			continue
		}
		log.Info("security: keys reloaded (SIGHUP)", "process", process, "key_ids", fmt.Sprint(auth.KeyIDs()),
			"signs_stream", auth.SigningKey(wire.KeyStream), "signs_commands", auth.SigningKey(wire.KeyCommand), "signs_acks", auth.SigningKey(wire.KeyMember))
	}
}

// keygenCommand writes a new key to a keys file.
func keygenCommand() *cli.Command {
	return &cli.Command{
		Name:  "keygen",
		Usage: "write a new key (random secret) to a keys file, mode 0600",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "the keys file to write (required)", Required: true},
			&cli.StringFlag{Name: "class", Value: "stream", Usage: "stream | member | command:ACCOUNT | command:* (shared by every account)"},
			&cli.UintFlag{Name: "id", Value: 1, Usage: "the key id (1..4294967295): unique among every key a process holds; a rotation adds a key with a higher id, which signers use"},
			&cli.BoolFlag{Name: "append", Usage: "add the key to an existing file (a rotation: the old key still verifies)"},
			&cli.BoolFlag{Name: "force", Usage: "overwrite an existing file"},
			&cli.BoolFlag{Name: "verify-only", Usage: "mark the key verify-only: it is accepted and never signs (step 1 of a rotation: add it everywhere and SIGHUP; then drop the mark everywhere and SIGHUP; then remove the old key)"},
		},
		Action: keygen,
	}
}

func keygen(c *cli.Context) error {
	id := c.Uint("id")
	if id == 0 || id > 1<<32-1 {
		return options.KeyError("id", fmt.Sprint(id), "1..4294967295")
	}
	probe, err := wire.ParseKeys(fmt.Sprintf("%d %s %s", id, c.String("class"), strings.Repeat("00", wire.AuthKeyBytes)))
	if err != nil {
		return fmt.Errorf("keygen: --class %q: %w", c.String("class"), err)
	}
	k := wire.NewKey(uint32(id), probe[0].Class, probe[0].Account)
	k.VerifyOnly = c.Bool("verify-only")
	out := c.String("out")
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	switch {
	case c.Bool("append"):
		old, err := readKeysFile(out, k.Class)
		if err != nil {
			return fmt.Errorf("keygen: --append %q: %w", out, err)
		}
		for _, o := range old {
			if o.ID == k.ID {
				return fmt.Errorf("keygen: %q already holds key id %d: give --id a new one", out, k.ID)
			}
		}
		flags = os.O_WRONLY | os.O_APPEND
	case c.Bool("force"):
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(out, flags, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("keygen: %q exists: --force overwrites it, --append adds a key to it", out)
	}
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("keygen: %w", err)
	}
	line := FormatKeyLine(k, c.Bool("append"))
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("keygen: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "wrote key %d (%s) to %s\n", k.ID, k.Name(), out)
	return nil
}

// FormatKeyLine is k as keygen writes it: a new file starts with a
// comment saying what it is.
func FormatKeyLine(k wire.Key, appended bool) string {
	if appended {
		return wire.FormatKey(k)
	}
	return "# seqd keys: ID CLASS SECRET (hex); keep this file secret (mode 0600)\n" + wire.FormatKey(k)
}
