package tiered

import "testing"

// A node announces its account, instance, activation and position
// (version 3); a version-2 encoding still decodes, with none of them.
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
	// Version 2: the same fields up to the admin address, nothing after.
	v2 := Meta{Name: "r", Role: RoleReplayer, NAKAddr: "h:1"}
	b, _ = AppendMeta(nil, &v2)
	b = b[:len(b)-5] // account length, instance, active, applied, pair length
	b[0] = 2
	if err := DecodeMeta(b, &got); err != nil || got != v2 {
		t.Fatalf("version 2: got %+v %v, want %+v", got, err, v2)
	}
	// A bridge end announces its pair (version 4).
	br := Meta{Name: "bridge-a1", Role: RoleBridge, Pair: "A-to-B/send", Active: true}
	if b, err = AppendMeta(nil, &br); err != nil {
		t.Fatal(err)
	}
	if err := DecodeMeta(b, &got); err != nil || got != br {
		t.Fatalf("bridge: got %+v %v, want %+v", got, err, br)
	}
	bad := Meta{Name: "n", Role: RoleNode, Account: "TOOLONGNAME"}
	if _, err := AppendMeta(nil, &bad); err == nil {
		t.Fatal("an account of 11 bytes was encoded")
	}
}
