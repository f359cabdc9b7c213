package tiered

import "testing"

// A node announces its account, instance, activation and position
// (version 2); a version-1 encoding still decodes, with none of them.
func TestMeta_NodeFields(t *testing.T) {
	m := Meta{Name: "shop-1", Role: RoleNode, Account: "SHOP", Instance: 1, Active: true, Applied: 12345}
	b, err := AppendMeta(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	var got Meta
	if err := DecodeMeta(b, &got); err != nil || got != m {
		t.Fatalf("got %+v %v, want %+v", got, err, m)
	}
	// Version 1: the same fields up to the rewind address, nothing after.
	v1 := Meta{Name: "r", Role: RoleReplayer, NAKAddr: "h:1"}
	b, _ = AppendMeta(nil, &v1)
	b = b[:len(b)-4] // account length, instance, active, applied
	b[0] = 1
	if err := DecodeMeta(b, &got); err != nil || got != v1 {
		t.Fatalf("version 1: got %+v %v, want %+v", got, err, v1)
	}
	bad := Meta{Name: "n", Role: RoleNode, Account: "TOOLONGNAME"}
	if _, err := AppendMeta(nil, &bad); err == nil {
		t.Fatal("an account of 11 bytes was encoded")
	}
}
