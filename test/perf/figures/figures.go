// Package figures draws the benchmark pages' figures as SVG, from the same
// results the pages' tables are written from, with gonum's plot: each
// round's value, not only the medians the tables hold.
package figures

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one profile's values of one figure.
type Series struct {
	Name string
	// Values holds, for each category (workload, gang size, ...), the
	// value of each round.
	Values [][]float64
}

// Rounds draws each round's value of each series, per category, side by
// side, with a line across at reference (1 for a ratio; NaN for none):
// the spread of the rounds is what the tables' medians hide.
func Rounds(title, ylabel string, categories []string, reference float64, series []Series) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.NominalX(categories...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	width := 0.6 / float64(max(len(series), 1))
	for s, ser := range series {
		var points plotter.XYs
		var medians plotter.XYs
		for c, rounds := range ser.Values {
			x := float64(c) - 0.3 + width*(float64(s)+0.5)
			for _, v := range rounds {
				if !math.IsNaN(v) {
					points = append(points, plotter.XY{X: x, Y: v})
				}
			}
			if m, ok := median(rounds); ok {
				medians = append(medians, plotter.XY{X: x, Y: m})
			}
		}
		if len(points) == 0 {
			continue
		}
		scatter, err := plotter.NewScatter(points)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ser.Name, err)
		}
		scatter.GlyphStyle.Color = plotutil.Color(s)
		scatter.GlyphStyle.Shape = draw.CircleGlyph{}
		scatter.GlyphStyle.Radius = vg.Points(2.5)
		mark, err := plotter.NewScatter(medians)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ser.Name, err)
		}
		mark.GlyphStyle.Color = plotutil.Color(s)
		mark.GlyphStyle.Shape = draw.PlusGlyph{}
		mark.GlyphStyle.Radius = vg.Points(6)
		p.Add(scatter, mark)
		p.Legend.Add(ser.Name+" (dots: each round; plus: median)", scatter)
	}
	if !math.IsNaN(reference) {
		line := plotter.NewFunction(func(float64) float64 { return reference })
		line.Color = color.Gray{Y: 128}
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(line)
	}
	p.Add(plotter.NewGrid())
	// Every category's tick shows, whatever its points.
	p.X.Min, p.X.Max = -0.5, float64(len(categories))-0.5
	return svg(p, len(categories))
}

// Lines draws each series against x, one line per series with each
// round's value as a point, on a log x axis when logX.
func Lines(title, xlabel, ylabel string, xs []float64, logX bool, series []Series) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	for s, ser := range series {
		var line, points plotter.XYs
		for i, rounds := range ser.Values {
			for _, v := range rounds {
				if !math.IsNaN(v) {
					points = append(points, plotter.XY{X: xs[i], Y: v})
				}
			}
			if m, ok := median(rounds); ok {
				line = append(line, plotter.XY{X: xs[i], Y: m})
			}
		}
		if len(line) == 0 {
			continue
		}
		l, err := plotter.NewLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ser.Name, err)
		}
		l.Color = plotutil.Color(s)
		sc, err := plotter.NewScatter(points)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ser.Name, err)
		}
		sc.GlyphStyle.Color = plotutil.Color(s)
		sc.GlyphStyle.Radius = vg.Points(2)
		p.Add(l, sc)
		p.Legend.Add(ser.Name+" (median; points: each round)", l)
	}
	p.Add(plotter.NewGrid())
	return svg(p, 4)
}

// Distributions draws one box per series and category: the spread of
// many values, such as gangs' waits.
func Distributions(title, ylabel string, categories []string, series []Series) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.NominalX(categories...)
	width := vg.Points(60 / float64(max(len(series), 1)))
	step := 0.7 / float64(max(len(series), 1))
	for s, ser := range series {
		added := false
		for c, values := range ser.Values {
			var vs plotter.Values
			for _, v := range values {
				if !math.IsNaN(v) {
					vs = append(vs, v)
				}
			}
			if len(vs) == 0 {
				continue
			}
			box, err := plotter.NewBoxPlot(width, float64(c)-0.35+step*(float64(s)+0.5), vs)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ser.Name, err)
			}
			box.FillColor = plotutil.Color(s)
			p.Add(box)
			if !added {
				p.Legend.Add(ser.Name, swatch{plotutil.Color(s)})
				added = true
			}
		}
	}
	p.Add(plotter.NewGrid())
	// Every category's tick shows, whatever its points.
	p.X.Min, p.X.Max = -0.5, float64(len(categories))-0.5
	return svg(p, len(categories))
}

// swatch is a legend entry of one colour, for boxes.
type swatch struct{ color color.Color }

// Thumbnail fills the legend's entry with the colour.
func (s swatch) Thumbnail(c *draw.Canvas) {
	corners := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(s.color, c.ClipPolygonY(corners))
}

// svg renders the plot, wider for more categories.
func svg(p *plot.Plot, categories int) ([]byte, error) {
	w := vg.Length(max(6, min(14, 1.2*float64(categories)))) * vg.Inch
	to, err := p.WriterTo(w, 4*vg.Inch, "svg")
	if err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	var b bytes.Buffer
	if _, err := to.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	return b.Bytes(), nil
}

// median of the values that are numbers.
func median(values []float64) (float64, bool) {
	var vs []float64
	for _, v := range values {
		if !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
}
