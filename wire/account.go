package wire

// Account is a sender's short name (1 to 8 printable ASCII bytes) packed
// into a uint64 so that it compares and hashes as one word. Hot-hot pairs
// share an account and differ by instance.
type Account uint64

// ParseAccount packs s into an Account.
func ParseAccount(s string) (Account, error) {
	if len(s) == 0 || len(s) > 8 {
		return 0, ErrAccount
	}
	var a uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' {
			return 0, ErrAccount
		}
		a |= uint64(c) << (8 * i)
	}
	return Account(a), nil
}

// MustAccount is ParseAccount for constants in tests and examples; it
// panics on a bad name.
func MustAccount(s string) Account {
	a, err := ParseAccount(s)
	if err != nil {
		panic(err)
	}
	return a
}

// String returns the account name; accounts that were not built by
// ParseAccount print their bytes up to the first zero.
func (a Account) String() string {
	var b [8]byte
	n := 0
	for i := 0; i < 8; i++ {
		c := byte(a >> (8 * i))
		if c == 0 {
			break
		}
		b[n] = c
		n++
	}
	return string(b[:n])
}
