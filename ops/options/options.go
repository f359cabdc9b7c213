package options

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/internal/logging"
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
	all := append([]cli.Flag{&cli.StringFlag{Name: "config", Usage: "TOML configuration file (one file can serve every seqd process of a host: keys of other subcommands are ignored, keys no subcommand knows are refused)", EnvVars: []string{"SEQD_CONFIG"}}}, flags...)
	register(flags)
	load := altsrc.InitInputSourceWithContext(flags, altsrc.NewTomlSourceFromFlagFunc("config"))
	return all, func(c *cli.Context) error {
		if path := c.String("config"); path != "" {
			if err := checkConfigKeys(path, flags); err != nil {
				return err
			}
			if err := load(c); err != nil {
				return configLoadError(path, err)
			}
		} else if err := load(c); err != nil {
			return err
		}
		return CheckLog(c)
	}
}

// everyKey holds the keys of every subcommand built with WithConfig, so
// that one file can configure every process of a host: a key another
// subcommand knows is left to it, a key none knows is a typo.
var everyKey = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

func register(flags []cli.Flag) {
	everyKey.Lock()
	defer everyKey.Unlock()
	for _, f := range flags {
		for _, n := range f.Names() {
			everyKey.m[n] = true
		}
	}
}

func knownElsewhere(key string) bool {
	everyKey.Lock()
	defer everyKey.Unlock()
	return everyKey.m[key]
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
			if !known[key] && !knownElsewhere(key) {
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

// LogFlags are --log-format and --log-level: a subcommand's (also TOML
// keys log-format and log-level, and SEQD_LOG_FORMAT, SEQD_LOG_LEVEL), or
// the global ones before the subcommand's name.
func LogFlags() []cli.Flag {
	return []cli.Flag{
		String("log-format", "text", "log lines on stderr: text (key=value) | json (one object a line)"),
		String("log-level", "info", "lowest level logged: debug | info | warn | error (--verbose is debug)"),
	}
}

// lineageValue is the value of key set nearest the subcommand (its flag,
// variable or config file, else the global flag), or def.
func lineageValue(c *cli.Context, key, def string) string {
	for _, x := range c.Lineage() {
		if x != nil && x.IsSet(key) {
			return x.String(key)
		}
	}
	return def
}

// CheckLog validates --log-format and --log-level wherever they were set.
func CheckLog(c *cli.Context) error {
	if err := OneOf("log-format", lineageValue(c, "log-format", "text"), logging.Formats...); err != nil {
		return err
	}
	if _, err := logging.ParseLevel(lineageValue(c, "log-level", "info")); err != nil {
		return KeyError("log-level", fmt.Sprintf("%q", lineageValue(c, "log-level", "info")), "one of: "+strings.Join(logging.Levels, ", "))
	}
	return nil
}

// NewLogger is the process's logger on stderr, in --log-format at
// --log-level (debug with --verbose). Bad values were refused before
// (CheckLog); here they fall back to text and info.
func NewLogger(c *cli.Context) *slog.Logger {
	level, err := logging.ParseLevel(lineageValue(c, "log-level", "info"))
	if err != nil {
		level = slog.LevelInfo
	}
	for _, x := range c.Lineage() {
		if x != nil && x.IsSet("verbose") && x.Bool("verbose") {
			level = slog.LevelDebug
		}
	}
	l, err := logging.New(os.Stderr, lineageValue(c, "log-format", "text"), level)
	if err != nil {
		l, _ = logging.New(os.Stderr, "text", level)
	}
	return l
}

// Keyed names what to fix: the package validators return a config.Error
// on a Go field; Keyed reports it on the configuration key keys maps the
// field to (flag --key, variable SEQD_KEY, or the key in the --config
// file). Other errors pass unchanged.
func Keyed(err error, keys map[string]string) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		if key, ok := keys[ce.Field]; ok {
			return KeyError(key, ce.Value, keyNames(ce.Allowed, keys))
		}
	}
	return err
}

// mismatched is altsrc's type error: "Mismatched type for flag 'KEY'.
// Expected 'WANT' but actual is 'GOT'".
var mismatched = regexp.MustCompile(`Mismatched type for flag '([^']+)'\. Expected '([^']+)'`)

// configLoadError names the file of an error loading it and, for a value
// of the wrong type, the key, the value as written and the type wanted
// (altsrc names only the key and two Go types).
func configLoadError(path string, err error) error {
	m := mismatched.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	key, want := m[1], m[2]
	value := "?"
	var doc map[string]any
	if _, derr := toml.DecodeFile(path, &doc); derr == nil {
		if v, ok := lookupKey(doc, key); ok {
			value = tomlValue(v)
		}
	}
	wants := map[string]string{
		"int": "an integer", "int64": "an integer", "uint64": "an integer >= 0", "uint": "an integer >= 0",
		"float64": "a number", "bool": "true or false", "string": "a string in quotes",
		"duration": `a duration in quotes ("300ms", "5s", "1m")`, "slice": `a list of strings (["a", "b"])`,
	}
	allowed := wants[want]
	if allowed == "" {
		allowed = "a " + want
	}
	return fmt.Errorf("config %s: %w", path, KeyError(key, value, allowed))
}

// lookupKey finds a dotted key in a decoded TOML document (udp.ttl is
// ttl in table [udp]; a key may itself hold dots, stream-group does not).
func lookupKey(doc map[string]any, key string) (any, bool) {
	if v, ok := doc[key]; ok {
		return v, true
	}
	head, rest, ok := strings.Cut(key, ".")
	if !ok {
		return nil, false
	}
	sub, ok := doc[head].(map[string]any)
	if !ok {
		return nil, false
	}
	return lookupKey(sub, rest)
}

// tomlValue prints a value as it was written in the file.
func tomlValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// keyNames is allowed with the Go field names it mentions written as
// their keys ("2*MaxPacketBytes (2944)..1073741824" is
// "2*sequencer.max-packet-bytes (2944)..1073741824"): a user sets keys.
func keyNames(allowed string, keys map[string]string) string {
	return goName.ReplaceAllStringFunc(allowed, func(w string) string {
		if k, ok := keys[w]; ok {
			return k
		}
		return w
	})
}

var goName = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\b`)

// SectionString is a string key whose name is also a table's ("gossip"
// and [gossip] bind = ...): TOML cannot hold both, so in a file it is
// written by its alias inside the table (alias "gossip.seeds" is seeds
// in [gossip]); the flag and variable keep the key's name. altsrc alone
// would read the table as the key's value and refuse it.
func SectionString(key, alias, value, usage string, env ...string) cli.Flag {
	return &sectionString{altsrc.NewStringFlag(&cli.StringFlag{Name: key, Aliases: []string{alias}, Value: value, Usage: usage,
		EnvVars: append(env, EnvName(key), EnvName(alias))})}
}

type sectionString struct{ *altsrc.StringFlag }

func (f *sectionString) ApplyInputSourceValue(c *cli.Context, isc altsrc.InputSourceContext) error {
	if c.IsSet(f.Name) {
		return nil
	}
	for _, e := range f.EnvVars {
		if _, ok := os.LookupEnv(e); ok {
			return nil
		}
	}
	v, err := isc.String(f.Aliases[0])
	if err != nil {
		return err
	}
	if v == "" {
		// The key itself, when it is not the table.
		if v, err = isc.String(f.Name); err != nil && !strings.Contains(err.Error(), "map[") {
			return err
		}
	}
	if v == "" {
		return nil
	}
	return c.Set(f.Name, v)
}
