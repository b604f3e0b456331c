// WINOGRAD_2X2_3X3 and WINOGRAD_4X4_3X3 on a 1x3 or 3x1 filter (CPU): the 1-D minimal filtering
// algorithms F(2,3) and F(4,3) along W or H (Lavin & Gray, Sec. 4, the 1-D algorithm the 2-D one
// nests), for 1-D convolutions (stored as 2-D with H = 1) and 2-D layers with 1x3 filters, by
// cpu/bilinear_1d.hpp; with stride 2 along the filter, F(2,2) / F(4,2) on the even inputs (the
// polyphase split, winograd_1d.cpp). winograd.cpp's solvers call these for a 1x3 or 3x1 filter
// that the fused NHWC schedule does not take (NCHW, groups, fewer channels than a vector, a
// stride).
#pragma once
#include <cstddef>
#include <string>

#include "core/solver.hpp"

namespace convcore {
namespace cpu {
namespace winograd_1d {

// Whether p has a 1x3 or 3x1 filter (this file's problems; the rest is the 2-D algorithm's).
bool takes(const ConvProblem& p);
// "" when F(m,3) (stride 1) or F(m,2)'s stride-2 form runs p (m: 2 or 4), otherwise why, naming
// the algorithm `name`.
std::string why_not(const std::string& name, const ConvProblem& p, int m);
size_t workspace_bytes(const ConvProblem& p, int m);
// The transformed filters U (alpha x K x C/groups per group), which a plan may prepare.
size_t prepared_bytes(const ConvProblem& p, int m);
void prepare(const ConvProblem& p, const Context& ctx, const void* w, void* out, int m);
// x and y packed NCHW or NHWC (p.nhwc); y = alpha * conv + beta * y.
void run(const ConvArgs& args, int m);

}  // namespace winograd_1d
}  // namespace cpu
}  // namespace convcore
