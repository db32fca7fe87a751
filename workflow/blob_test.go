package workflow

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/testredis"
)

func TestDecodeBase64(t *testing.T) {
	bin := []byte{0, 1, 2, 250, 251, 252, 253, 254, 255}
	cases := []struct {
		name, in  string
		wantMedia string
		ok        bool
	}{
		{"data URL", "data:image/PNG;base64," + base64.StdEncoding.EncodeToString(bin), "image/png", true},
		{"bare standard", base64.StdEncoding.EncodeToString(bin), "application/octet-stream", true},
		{"bare URL alphabet, unpadded", base64.RawURLEncoding.EncodeToString(bin), "application/octet-stream", true},
		{"prose is not base64", "The CEO of Acme Corp is John Doe, reachable at the usual address.", "", false},
		{"broken padding", base64.StdEncoding.EncodeToString(bin) + "=", "", false},
		{"a data URL with a bad payload", "data:image/png;base64,***", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			media, raw, ok := decodeBase64(c.in)
			if ok != c.ok || media != c.wantMedia || (ok && !bytes.Equal(raw, bin)) {
				t.Errorf("decodeBase64 = %q, %v, %v; want %q, %v", media, raw, ok, c.wantMedia, c.ok)
			}
		})
	}
}

func TestExternalize(t *testing.T) {
	store := NewMemoryBlobStore(0)
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 3000))
	data := map[string]any{
		"small":  base64.StdEncoding.EncodeToString([]byte("tiny")),
		"nested": map[string]any{"list": []any{big, "text"}},
		"prose":  strings.Repeat("words and more words ", 300),
	}
	refs, err := externalize(testCtx(t), store, data, 1024, []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 {
		t.Fatalf("refs %v, want the one large base64 value", refs)
	}
	got := data["nested"].(map[string]any)["list"].([]any)[0].(map[string]any)
	if got["$ref"] != refs[0]["$ref"] || got["size"] != 3000 {
		t.Errorf("replaced by %v", got)
	}
	if _, ok := data["small"].(string); !ok {
		t.Error("a value under the limit must stay inline")
	}
	if _, ok := data["prose"].(string); !ok {
		t.Error("long prose must stay inline")
	}
	text, err := blobText(testCtx(t), store, got)
	if err != nil || text != "data:application/octet-stream;base64,"+big {
		t.Errorf("blobText = %.40q, %v", text, err)
	}
	if _, err := blobText(testCtx(t), store, map[string]any{"$ref": "https://example.com/x"}); err == nil {
		t.Error("a reference that is not a blob must be refused")
	}
}

func TestBlobStores(t *testing.T) {
	cases := []struct {
		name string
		open func(t *testing.T) BlobStore
	}{
		{"memory", func(*testing.T) BlobStore { return NewMemoryBlobStore(0) }},
		{"redis", func(t *testing.T) BlobStore { return NewRedisBlobStore(testredis.Start(t).Client(t), "", 0, 0) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.open(t)
			ctx := testCtx(t)
			b := Blob{SHA256: strings.Repeat("ab", 32), MediaType: "image/png", Data: []byte{1, 2, 3}, Agents: []string{"x"}}
			if err := s.Put(ctx, b); err != nil {
				t.Fatal(err)
			}
			b.Agents = []string{"y"}
			if err := s.Put(ctx, b); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, b.SHA256)
			if err != nil || !bytes.Equal(got.Data, b.Data) || got.MediaType != "image/png" || strings.Join(got.Agents, ",") != "x,y" {
				t.Fatalf("Get = %+v, %v: the same bytes stored twice keep both runs' agents", got, err)
			}
			if _, err := s.Get(ctx, strings.Repeat("cd", 32)); !errors.Is(err, ErrNotFound) {
				t.Errorf("missing blob: %v", err)
			}
		})
	}
	t.Run("memory: full, the oldest go", func(t *testing.T) {
		s := NewMemoryBlobStore(10)
		ctx := testCtx(t)
		for i, sha := range []string{"a", "b", "c"} {
			if err := s.Put(ctx, Blob{SHA256: sha, Data: bytes.Repeat([]byte{byte(i)}, 4)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Error("the oldest blob should have made room")
		}
		if _, err := s.Get(ctx, "c"); err != nil {
			t.Error(err)
		}
		if err := s.Put(ctx, Blob{SHA256: "d", Data: make([]byte, 11)}); !errors.Is(err, ErrBlobTooLarge) {
			t.Errorf("a blob over the whole store: %v", err)
		}
	})
}
