package output

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

// TestEncodeGolden: the value's bytes for a fixed record, written out by
// hand from the package doc's schema.
func TestEncodeGolden(t *testing.T) {
	r := Record{Source: Source{Topic: "vec\"tors", Partition: 2, Offset: 41}, HasModel: true, Incarnation: "a1", Version: 9,
		Projection: []float64{0.5, -1e-300, 3}, Residual: 0.125, Novelty: 0.9995, Novel: true}
	m := r.Encode()
	want := `{"source":{"topic":"vec\"tors","partition":2,"offset":41},"model":{"incarnation":"a1","version":9},"projection":[0.5,-1e-300,3],"residual":0.125,"novelty":0.9995,"novel":true}`
	if string(m.Value) != want {
		t.Fatalf("value\n %s\nwant\n %s", m.Value, want)
	}
	if string(m.Key) != "vec\"tors/2/41" || m.Partition != 2 {
		t.Errorf("key %q partition %d", m.Key, m.Partition)
	}
	r.Residual, r.Novelty, r.Novel = math.NaN(), math.NaN(), false
	var v struct {
		Residual, Novelty *float64
		Projection        []float64
	}
	if err := json.Unmarshal(r.Encode().Value, &v); err != nil || v.Residual != nil || v.Novelty != nil || !slices.Equal(v.Projection, r.Projection) {
		t.Errorf("unknown residual: %s (%v)", r.Encode().Value, err)
	}
	two := Record{Source: Source{Topic: "p", Offset: 3}, HasModel: true, Incarnation: "b2", Version: 4,
		Projection: []float64{1, 2}, ProjectionY: []float64{-0.25, 5e-7}, Residual: math.NaN(), Novelty: math.NaN()}
	if got := string(two.Encode().Value); got != `{"source":{"topic":"p","partition":0,"offset":3},"model":{"incarnation":"b2","version":4},"projection":[1,2],"projection_y":[-0.25,5e-07],"residual":null,"novelty":null,"novel":false}` {
		t.Errorf("a two-view record: %s", got)
	}
	none := Record{Source: Source{Topic: "t", Offset: 1}, Key: []byte("k")}
	if got := string(none.Encode().Value); got != `{"source":{"topic":"t","partition":0,"offset":1},"model":null,"projection":null,"residual":null,"novelty":null,"novel":false}` {
		t.Errorf("record without a model: %s", got)
	}
	if string(none.Encode().Key) != "k" {
		t.Error("the input's key not kept")
	}
}
