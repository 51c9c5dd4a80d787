HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY main {
  p = f32[4]{0} parameter(0)
  ROOT a = f32[4]{0} add(p, p)
}
