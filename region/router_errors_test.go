package region

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/lead"
)

// A refusal for a lost race says what to do about it; one for a router
// that does not lead names the leader instead.
func TestShardErrorBodySaysWhatToDo(t *testing.T) {
	lost := fmt.Errorf("record node n1: %w", global.ErrConflict)
	if code := shardCode(lost); code != http.StatusConflict {
		t.Fatalf("lost race: %d", code)
	}
	if msg := shardErrorBody(lost)["error"].(string); !strings.Contains(msg, "send the request again") || !strings.HasPrefix(msg, lost.Error()) {
		t.Fatalf("lost race: %q", msg)
	}
	nl := &lead.NotLeaderError{Leader: "r2", Term: 3}
	body := shardErrorBody(nl)
	if body["leader"] != "r2" || body["term"] != uint64(3) || body["error"] != nl.Error() {
		t.Fatalf("not leader: %v", body)
	}
}
