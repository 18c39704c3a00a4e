// Registers rnn.h's cells under autograd: their compositions are differentiated op by op.
#include <torch/library.h>

#include "rnn.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fusedLstmCell));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fusedGruCell));
}

}  // namespace pto::torch_glue
