package options

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/transport/fault"
)

// EnvName is the environment variable of a configuration key.
func EnvName(key string) string {
	r := strings.NewReplacer(".", "_", "-", "_")
	return "SEQD_" + strings.ToUpper(r.Replace(key))
}

// String, Int, Uint, Bool and Duration are flags of a configuration key,
// also read from its environment variable and the --config file.
func String(key, value, usage string) cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: key, Value: value, Usage: usage, EnvVars: []string{EnvName(key)}})
}

// StringAlias is String under a second, older name too (flag, TOML key
// and environment variable).
func StringAlias(key, alias, value, usage string) cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: key, Aliases: []string{alias}, Value: value, Usage: usage, EnvVars: []string{EnvName(key), EnvName(alias)}})
}

func Int(key string, value int, usage string) cli.Flag {
	return altsrc.NewIntFlag(&cli.IntFlag{Name: key, Value: value, Usage: usage, EnvVars: []string{EnvName(key)}})
}

func Uint(key string, value uint64, usage string) cli.Flag {
	return altsrc.NewUint64Flag(&cli.Uint64Flag{Name: key, Value: value, Usage: usage, EnvVars: []string{EnvName(key)}})
}

func Bool(key string, value bool, usage string) cli.Flag {
	return altsrc.NewBoolFlag(&cli.BoolFlag{Name: key, Value: value, Usage: usage, EnvVars: []string{EnvName(key)}})
}

func Duration(key string, value time.Duration, usage string) cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: key, Value: value, Usage: usage, EnvVars: []string{EnvName(key)}})
}

// WithConfig adds --config to flags and returns a Before hook that loads
// the TOML file, refusing keys no flag knows (a typo must not be ignored).
func WithConfig(flags []cli.Flag) ([]cli.Flag, cli.BeforeFunc) {
	all := append([]cli.Flag{&cli.StringFlag{Name: "config", Usage: "TOML configuration file", EnvVars: []string{"SEQD_CONFIG"}}}, flags...)
	load := altsrc.InitInputSourceWithContext(flags, altsrc.NewTomlSourceFromFlagFunc("config"))
	return all, func(c *cli.Context) error {
		if path := c.String("config"); path != "" {
			if err := checkConfigKeys(path, flags); err != nil {
				return err
			}
		}
		return load(c)
	}
}

func checkConfigKeys(path string, flags []cli.Flag) error {
	var doc map[string]any
	if _, err := toml.DecodeFile(path, &doc); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	known := map[string]bool{}
	for _, f := range flags {
		for _, n := range f.Names() {
			known[n] = true
		}
	}
	var bad []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			if sub, ok := v.(map[string]any); ok {
				walk(key+".", sub)
				continue
			}
			if !known[key] {
				bad = append(bad, key)
			}
		}
	}
	walk("", doc)
	if len(bad) > 0 {
		var keys []string
		for k := range known {
			keys = append(keys, k)
		}
		sort.Strings(bad)
		sort.Strings(keys)
		return fmt.Errorf("config %s: unknown key(s) %s (known keys: %s)", path, strings.Join(bad, ", "), strings.Join(keys, ", "))
	}
	return nil
}

// ErrConfig is the sentinel of configuration errors reported on a key.
// Its text is what a user reads first ("invalid configuration: ..."),
// so it carries no package prefix.
var ErrConfig = errors.New("invalid configuration")

// KeyError is a config.Error on a configuration key, saying where the key
// can be set.
func KeyError(key, value, allowed string) error {
	return &keyedError{ce: &config.Error{Field: key, Value: value, Allowed: allowed, Err: ErrConfig}}
}

// keyedError prints a config.Error with the flag and variable of its key;
// errors.As finds the config.Error inside.
type keyedError struct{ ce *config.Error }

func (e *keyedError) Error() string {
	return fmt.Sprintf("%v (flag --%s, variable %s)", e.ce, e.ce.Field, EnvName(e.ce.Field))
}

func (e *keyedError) Unwrap() error { return e.ce }

// OneOf checks an enumerated configuration value.
func OneOf(key, value string, allowed ...string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return KeyError(key, fmt.Sprintf("%q", value), "one of: "+strings.Join(allowed, ", "))
}

// FaultsFromEnv reads SEQD_FAULTS and says so loudly: a chaos drill must
// never be mistaken for production.
func FaultsFromEnv(log *slog.Logger, role string) (fault.Config, error) {
	f, err := fault.FromEnv()
	if err != nil {
		return f, fmt.Errorf("%s: %w", fault.EnvVar, err)
	}
	if f.Enabled() {
		log.Warn("FAULT INJECTION ENABLED: this process drops, duplicates and reorders frames on purpose",
			"role", role, "env", fault.EnvVar, "faults", f.String())
	}
	return f, nil
}

// NewLogger is the process's logger: text on stderr, debug with
// --verbose.
func NewLogger(c *cli.Context) *slog.Logger {
	level := slog.LevelInfo
	if c.Bool("verbose") {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Keyed names what to fix: the package validators return a config.Error
// on a Go field; Keyed reports it on the configuration key keys maps the
// field to (flag --key, variable SEQD_KEY, or the key in the --config
// file). Other errors pass unchanged.
func Keyed(err error, keys map[string]string) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		if key, ok := keys[ce.Field]; ok {
			return KeyError(key, ce.Value, ce.Allowed)
		}
	}
	return err
}
