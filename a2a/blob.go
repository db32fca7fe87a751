package a2a

import (
	"context"
	"fmt"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
)

// BlobStore keeps file bytes by SHA-256 for the agents that may read them
// (the workflows' store, served at GET /blobs/{sha256}).
type BlobStore interface {
	Put(ctx context.Context, sha, mediaType string, data []byte, readers []string) error
}

// toBlobs moves the bytes of each raw part larger than the inline limit
// to the blob store, readable by reader only, and leaves a URL part in
// its place (<gateway>/blobs/{sha256}, its file name and media type kept,
// metadata gateway_blob "blob:sha256:…"): the bytes reach the other side
// through the gateway, on its reader's token. Off without a store.
func (d *Door) toBlobs(ctx context.Context, cl *call, ps sdk.ContentParts, reader string) error {
	if d.blobs == nil || cl.conf.maxInline <= 0 {
		return nil
	}
	for _, p := range ps {
		if p == nil {
			continue
		}
		raw, ok := p.Content.(sdk.Raw)
		if !ok || len(raw) <= cl.conf.maxInline {
			continue
		}
		sha := sha256Hex(raw)
		media := p.MediaType
		if media == "" {
			media = "application/octet-stream"
		}
		if err := d.blobs.Put(ctx, sha, media, raw, []string{reader}); err != nil {
			return fmt.Errorf("a2a: blob: %w", err)
		}
		p.Content = sdk.URL(cl.base + "/blobs/" + sha)
		p.SetMeta("gateway_blob", "blob:sha256:"+sha)
	}
	return nil
}

// eventParts are the parts an agent's answer or event carries.
func eventParts(ev sdk.Event) []sdk.ContentParts {
	var out []sdk.ContentParts
	msg := func(m *sdk.Message) {
		if m != nil {
			out = append(out, m.Parts)
		}
	}
	switch e := ev.(type) {
	case *sdk.Message:
		msg(e)
	case *sdk.Task:
		msg(e.Status.Message)
		for _, m := range e.History {
			msg(m)
		}
		for _, a := range e.Artifacts {
			if a != nil {
				out = append(out, a.Parts)
			}
		}
	case *sdk.TaskStatusUpdateEvent:
		msg(e.Status.Message)
	case *sdk.TaskArtifactUpdateEvent:
		if e.Artifact != nil {
			out = append(out, e.Artifact.Parts)
		}
	}
	return out
}
