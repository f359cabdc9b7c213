package options

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// Key is one configuration key of a subcommand: what `seqd config
// print-defaults` prints. Default is the flag's default, which the
// subcommands take from their packages' DefaultConfig.
type Key struct {
	Name    string // "udp.stream-group"
	Default any    // string, int, uint64, bool, time.Duration or []string
	Usage   string
	Aliases []string
}

// Keys are the configuration keys among flags (those a --config file
// can set), in their order.
func Keys(flags []cli.Flag) []Key {
	var out []Key
	for _, f := range flags {
		var k Key
		switch f := f.(type) {
		case *sectionString:
			k = Key{f.Name, f.Value, f.Usage, f.Aliases}
		case *altsrc.StringFlag:
			k = Key{f.Name, f.Value, f.Usage, f.Aliases}
		case *altsrc.IntFlag:
			k = Key{f.Name, f.Value, f.Usage, f.Aliases}
		case *altsrc.Uint64Flag:
			k = Key{f.Name, f.Value, f.Usage, f.Aliases}
		case *altsrc.BoolFlag:
			k = Key{f.Name, f.Value, f.Usage, f.Aliases}
		case *altsrc.DurationFlag:
			k = Key{f.Name, f.Value, f.Usage, f.Aliases}
		case *altsrc.StringSliceFlag:
			var v []string
			if f.Value != nil {
				v = f.Value.Value()
			}
			k = Key{f.Name, v, f.Usage, f.Aliases}
		default:
			continue
		}
		out = append(out, k)
	}
	return out
}

// KeyUse is a key and the subcommands that take it.
type KeyUse struct {
	Key
	// By are the subcommands that take the key, with their defaults where
	// they differ from Default (then the key is printed commented out).
	By       []string
	Defaults map[string]any
}

// Merge is every subcommand's keys, each once: by maps a subcommand's
// name to its keys, names gives the order.
func Merge(names []string, by map[string][]Key) []KeyUse {
	var out []KeyUse
	at := map[string]int{}
	for _, n := range names {
		for _, k := range by[n] {
			i, ok := at[k.Name]
			if !ok {
				at[k.Name] = len(out)
				out = append(out, KeyUse{Key: k, Defaults: map[string]any{}})
				i = len(out) - 1
			}
			out[i].By = append(out[i].By, n)
			out[i].Defaults[n] = k.Default
		}
	}
	return out
}

// differs reports whether the subcommands of u disagree on its default.
func (u KeyUse) differs() bool {
	for _, d := range u.Defaults {
		if tomlLiteral(d) != tomlLiteral(u.Default) {
			return true
		}
	}
	return false
}

// WriteTOML writes keys as a TOML file: keys without a dot first, then a
// table per prefix ("udp.ttl" is ttl in [udp]), each key commented out
// ("# ttl = 1": a key set in a file counts as given, and some keys mean
// something by being given, as --id does) under a comment with its usage
// and the subcommands that take it; a key whose default differs between
// subcommands is written once per subcommand. Uncommenting a key's line
// gives a file --config loads.
func WriteTOML(w io.Writer, uses []KeyUse) error {
	uses = tableAliases(uses)
	tables := map[string][]KeyUse{}
	var order []string
	for _, u := range uses {
		t := ""
		if i := strings.LastIndex(u.Name, "."); i >= 0 {
			t = u.Name[:i]
		}
		if _, ok := tables[t]; !ok {
			order = append(order, t)
		}
		tables[t] = append(tables[t], u)
	}
	slices.Sort(order) // "" (the top level) first
	var b strings.Builder
	for i, t := range order {
		if t != "" {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "[%s]\n", t)
		}
		for j, u := range tables[t] {
			name := u.Name[strings.LastIndex(u.Name, ".")+1:]
			if j > 0 {
				b.WriteString("\n")
			}
			comment(&b, u.Usage)
			comment(&b, "(seqd "+strings.Join(u.By, ", ")+"; --"+u.Name+", "+EnvName(u.Name)+")")
			if u.differs() {
				for _, n := range u.By {
					fmt.Fprintf(&b, "# %s = %s  # seqd %s\n", name, tomlLiteral(u.Defaults[n]), n)
				}
				continue
			}
			fmt.Fprintf(&b, "# %s = %s\n", name, tomlLiteral(u.Default))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// comment writes text as "# " lines of at most 76 columns.
func comment(b *strings.Builder, text string) {
	line := "#"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 76 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
}

// tomlLiteral is v as TOML: durations as strings ("300ms"), as the
// duration keys are read.
func tomlLiteral(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case time.Duration:
		return fmt.Sprintf("%q", v.String())
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// tableAliases writes a key that is also a table's name ("gossip" and
// [gossip]: TOML cannot hold both) by its alias inside the table
// ("gossip.seeds" is seeds in [gossip]), or commented out if it has none.
func tableAliases(uses []KeyUse) []KeyUse {
	tables := map[string]bool{}
	for _, u := range uses {
		if i := strings.LastIndex(u.Name, "."); i >= 0 {
			tables[u.Name[:i]] = true
		}
	}
	out := make([]KeyUse, 0, len(uses))
	for _, u := range uses {
		if tables[u.Name] {
			renamed := false
			for _, a := range u.Aliases {
				if strings.HasPrefix(a, u.Name+".") {
					u.Usage += " (key " + a + ": the TOML name of --" + u.Name + ")"
					u.Name, renamed = a, true
					break
				}
			}
			if !renamed {
				continue // a file cannot set it; the flag and variable can
			}
		}
		out = append(out, u)
	}
	return out
}
