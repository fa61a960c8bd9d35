"""The fast path of the recurrent units: backpropagation through time written by hand.

Autograd records every operation of every step, and at small batch that bookkeeping costs
more than the arithmetic. Here each unit runs the whole sequence as one
`torch.autograd.Function`:

- the forward pass computes the input terms U = W_hx x^<t> + b_h of all steps in one
  product, then runs the loop over time without autograd, writing each step into
  preallocated buffers and keeping the activations the backward pass needs;
- the backward pass runs the adjoint recursion (7.6) back in time: at each step a few
  element-wise operations give the errors delta^<t> of the pre-activations, and one
  product with W_hh, the Jacobian (7.11), carries the adjoint to the step before;
- the gradients of the weights sum over all steps, (7.9)-(7.10), in one matrix product
  each at the end: g_W_hh = sum_t delta^<t> h^<t-1>^T, g_W_hx = sum_t delta^<t> x^<t>^T.

Tensors are time-major here, x (T, B, p), so that the slices of one step are contiguous;
states are (B, m). The results equal the textbook path's (tests/test_fast_path.py).
"""

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable


def _steps(X: torch.Tensor, sizes: list[int]) -> list[tuple]:
    """Views of a time-major buffer X (T, B, n), split along its last dimension into
    blocks of `sizes`: one tuple of views per step, made once, before the loop."""
    return list(zip(*(block.unbind(0) for block in X.split(sizes, dim=-1)), strict=True))


def _product_gradient(delta: torch.Tensor, operand: torch.Tensor) -> torch.Tensor:
    """sum_t delta^<t>^T operand^<t> for (T, B, n) and (T, B, k): one (n, k) product."""
    T, B, n = delta.shape
    return delta.reshape(T * B, n).T @ operand.reshape(T * B, -1)  # (n, T B) @ (T B, k)


def _input_gradients(needs, delta, X, W_hx):
    """Gradients of x, W_hx and b_h from the errors delta (T, B, G m) of U = W_hx x + b_h;
    `needs` says which of the three are wanted (None for the others)."""
    T, B, G = delta.shape
    flat = delta.reshape(T * B, G)
    dX = (flat @ W_hx).view(T, B, -1) if needs[0] else None  # (T, B, p)
    dW_hx = _product_gradient(delta, X) if needs[1] else None
    db_h = flat.sum(0) if needs[2] else None
    return dX, dW_hx, db_h


class RNNScan(torch.autograd.Function):
    """(7.2) over all steps: h^<t> = S_h(W_hh h^<t-1> + W_hx x^<t> + b_h), for the
    activations whose derivative is written here in terms of h: tanh, S_h' = 1 - h^2, and
    relu, S_h' = 1 where h > 0."""

    activations = {"tanh": torch.Tensor.tanh_, "relu": torch.Tensor.relu_}  # in place
    slopes = {"tanh": lambda h: 1 - h * h, "relu": lambda h: (h > 0).to(h.dtype)}

    @staticmethod
    def forward(ctx, X, h0, W_hx, W_hh, b_h, nonlinearity):
        T, B, p = X.shape
        m = W_hh.shape[1]
        H = X.new_empty(T + 1, B, m)  # H[t] = h^<t>, h^<0> included
        H[0] = h0
        # W_hx x^<t> + b_h of every step, (T B, m), overwritten by h^<t> in the loop
        torch.addmm(b_h, X.view(T * B, p), W_hx.T, out=H[1:].view(T * B, m))
        S_h_, Hs, W_T = RNNScan.activations[nonlinearity], H.unbind(0), W_hh.T
        for t in range(T):
            S_h_(Hs[t + 1].addmm_(Hs[t], W_T))
        ctx.nonlinearity = nonlinearity
        ctx.save_for_backward(X, H, W_hx, W_hh)
        return H[1:], H[-1]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_H, grad_h):
        X, H, W_hx, W_hh = ctx.saved_tensors
        T = X.shape[0]
        slope = RNNScan.slopes[ctx.nonlinearity](H[1:])  # S_h' of every step, (T, B, m)
        delta = torch.empty_like(slope)  # delta^<t>: error of the pre-activation
        zeta = grad_H[-1] + grad_h  # zeta^<T> = dC/dh^<T>
        deltas, slopes, grads = delta.unbind(0), slope.unbind(0), grad_H.unbind(0)
        for t in range(T - 1, -1, -1):
            if t < T - 1:  # (7.6): zeta^<t> = dC/dh^<t> + W_hh^T delta^<t+1>
                zeta = torch.addmm(grads[t], deltas[t + 1], W_hh)
            torch.mul(zeta, slopes[t], out=deltas[t])
        needs = ctx.needs_input_grad
        dX, dW_hx, db_h = _input_gradients((needs[0], needs[2], needs[4]), delta, X, W_hx)
        dh0 = delta[0] @ W_hh if needs[1] else None
        dW_hh = _product_gradient(delta, H[:-1]) if needs[3] else None
        return dX, dh0, dW_hx, dW_hh, db_h, None


class LSTMScan(torch.autograd.Function):
    """(7.16)-(7.17) over all steps, with the gate blocks in torch.nn's order
    (g_i, g_f, c_tilde, g_o): z = W_hh h^<t-1> + W_hx x^<t> + b_h, then
    c = g_f c + g_i c_tilde and h = g_o tanh(c)."""

    @staticmethod
    def forward(ctx, X, h0, c0, W_hx, W_hh, b_h):
        T, B, _ = X.shape
        m = W_hh.shape[1]
        Z = F.linear(X, W_hx, b_h)  # (T, B, 4 m): input terms, then the gate activations
        C = X.new_empty(T + 1, B, m)  # C[t] = c^<t>, c^<0> included
        H = torch.empty_like(C)
        tanh_c = X.new_empty(T, B, m)
        C[0], H[0] = c0, h0
        W_T = W_hh.T
        Hs, Cs, Zs, tanh_cs = H.unbind(0), C.unbind(0), Z.unbind(0), tanh_c.unbind(0)
        gates = _steps(Z, [m, m, m, m])
        for t in range(T):
            Zs[t].addmm_(Hs[t], W_T)  # (B, 4 m): the products of all gates in one
            g_i, g_f, c_tilde, g_o = gates[t]
            Zs[t][:, :2 * m].sigmoid_()  # g_i and g_f
            c_tilde.tanh_()
            g_o.sigmoid_()
            torch.mul(g_f, Cs[t], out=Cs[t + 1]).addcmul_(g_i, c_tilde)  # c^<t>
            torch.mul(g_o, torch.tanh(Cs[t + 1], out=tanh_cs[t]), out=Hs[t + 1])  # h^<t>
        ctx.save_for_backward(X, Z, C, H, tanh_c, W_hx, W_hh)
        return H[1:], H[-1], C[-1]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_H, grad_h, grad_c):
        X, Z, C, H, tanh_c, W_hx, W_hh = ctx.saved_tensors
        T, B, _ = X.shape
        m = W_hh.shape[1]
        delta = torch.empty_like(Z)  # errors of the pre-activations of every step
        gates, errors = _steps(Z, [m, m, m, m]), _steps(delta, [m, m, m, m])
        Hs, Cs, tanh_cs, grads = H.unbind(0), C.unbind(0), tanh_c.unbind(0), grad_H.unbind(0)
        zeta = grad_H[-1] + grad_h  # zeta^<T> = dC/dh^<T>
        carried = grad_c  # what reaches c^<t> from c^<t+1> = g_f c^<t> + ...
        dc, q, r, rc, v = (torch.empty_like(zeta) for _ in range(5))
        for t in range(T - 1, -1, -1):
            g_i, g_f, c_tilde, g_o = gates[t]
            d_i, d_f, d_c, d_o = errors[t]
            if t < T - 1:
                zeta = torch.addmm(grads[t], delta[t + 1], W_hh)  # (7.6)
            torch.mul(zeta, tanh_cs[t], out=q)
            torch.addcmul(carried, zeta, g_o, out=dc).addcmul_(q, Hs[t + 1], value=-1)
            torch.addcmul(q, q, g_o, value=-1, out=d_o).mul_(g_o)  # q g_o (1 - g_o)
            torch.mul(dc, g_i, out=r)
            torch.mul(r, c_tilde, out=rc)
            torch.addcmul(rc, rc, g_i, value=-1, out=d_i)  # dc c_tilde g_i (1 - g_i)
            torch.addcmul(r, rc, c_tilde, value=-1, out=d_c)  # dc g_i (1 - c_tilde^2)
            carried = torch.mul(dc, g_f, out=v)
            torch.mul(carried, Cs[t], out=rc)
            torch.addcmul(rc, rc, g_f, value=-1, out=d_f)  # dc c_prev g_f (1 - g_f)
        needs = ctx.needs_input_grad
        dX, dW_hx, db_h = _input_gradients((needs[0], needs[3], needs[5]), delta, X, W_hx)
        dh0 = delta[0] @ W_hh if needs[1] else None
        dW_hh = _product_gradient(delta, H[:-1]) if needs[4] else None
        return dX, dh0, carried if needs[2] else None, dW_hx, dW_hh, db_h


class GRUScan(torch.autograd.Function):
    """(7.18)-(7.19) over all steps in the chapter's form, the reset gate applied before the
    product, gate blocks (g_r, g_u, h_tilde): g_r and g_u from one product with W_hh's
    first 2 m rows, h_tilde = tanh(W_h~h (g_r h^<t-1>) + W_h~x x + b_h~) from the last m,
    then h^<t> = h^<t-1> + g_u (h_tilde - h^<t-1>)."""

    @staticmethod
    def forward(ctx, X, h0, W_hx, W_hh, b_h):
        T, B, _ = X.shape
        m = W_hh.shape[1]
        Z = F.linear(X, W_hx, b_h)  # (T, B, 3 m): input terms, then g_r, g_u, h_tilde
        H = X.new_empty(T + 1, B, m)  # H[t] = h^<t>, h^<0> included
        RH = X.new_empty(T, B, m)  # g_r h^<t-1>, what W_h~h multiplies
        H[0] = h0
        W_ru, W_c = W_hh[:2 * m].T, W_hh[2 * m:].T
        Hs, RHs = H.unbind(0), RH.unbind(0)
        blocks, gates = _steps(Z, [2 * m, m]), _steps(Z, [m, m, m])
        for t in range(T):
            z_ru, h_tilde = blocks[t]
            g_r, g_u, _ = gates[t]
            z_ru.addmm_(Hs[t], W_ru).sigmoid_()  # g_r and g_u, one product for both
            h_tilde.addmm_(torch.mul(g_r, Hs[t], out=RHs[t]), W_c).tanh_()
            torch.lerp(Hs[t], h_tilde, g_u, out=Hs[t + 1])  # (1 - g_u) h + g_u h_tilde
        ctx.save_for_backward(X, Z, H, RH, W_hx, W_hh)
        return H[1:], H[-1]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_H, grad_h):
        X, Z, H, RH, W_hx, W_hh = ctx.saved_tensors
        T, B, _ = X.shape
        m = W_hh.shape[1]
        W_ru, W_c = W_hh[:2 * m], W_hh[2 * m:]
        delta = torch.empty_like(Z)  # errors of the pre-activations of g_r, g_u, h_tilde
        gates, errors = _steps(Z, [m, m, m]), _steps(delta, [m, m, m])
        Hs, grads = H.unbind(0), grad_H.unbind(0)
        zeta = grad_H[-1] + grad_h  # zeta^<T> = dC/dh^<T>
        a, b, w, d_rh, spare = (torch.empty_like(zeta) for _ in range(5))
        for t in range(T - 1, -1, -1):
            g_r, g_u, h_tilde = gates[t]
            d_r, d_u, d_c = errors[t]
            h_prev = Hs[t]
            torch.mul(zeta, g_u, out=a)  # dC/dh_tilde
            torch.mul(a, h_tilde, out=b)
            torch.addcmul(a, b, h_tilde, value=-1, out=d_c)  # a (1 - h_tilde^2)
            torch.mm(d_c, W_c, out=d_rh)  # dC/d(g_r h^<t-1>)
            torch.sub(h_tilde, h_prev, out=w).mul_(zeta)  # dC/dg_u
            torch.addcmul(w, w, g_u, value=-1, out=d_u).mul_(g_u)  # w g_u (1 - g_u)
            torch.mul(d_rh, h_prev, out=b)  # dC/dg_r
            torch.addcmul(b, b, g_r, value=-1, out=d_r).mul_(g_r)  # b g_r (1 - g_r)
            # what reaches h^<t-1>: directly, through g_r h^<t-1>, and through both gates
            carried = torch.sub(zeta, a, out=spare).addcmul_(d_rh, g_r)  # zeta (1 - g_u) + ...
            carried.addmm_(delta[t, :, :2 * m], W_ru)
            if t > 0:
                spare, zeta = zeta, carried.add_(grads[t - 1])  # (7.6)
        needs = ctx.needs_input_grad
        dX, dW_hx, db_h = _input_gradients((needs[0], needs[2], needs[4]), delta, X, W_hx)
        dW_hh = None
        if needs[3]:
            dW_hh = torch.cat([_product_gradient(delta[..., :2 * m], H[:-1]),
                               _product_gradient(delta[..., 2 * m:], RH)])
        return dX, carried if needs[1] else None, dW_hx, dW_hh, db_h


class GRUResetAfterScan(torch.autograd.Function):
    """The GRU in PyTorch's form (`reset_after=True`): one product p = W_hh h^<t-1> +
    (0, 0, b_hn) for all three blocks, g_r, g_u = sigmoid(p_r,u + U_r,u),
    n = tanh(U_n + g_r p_n), h^<t> = h^<t-1> + g_u (n - h^<t-1>)."""

    @staticmethod
    def forward(ctx, X, h0, W_hx, W_hh, b_h, b_hn):
        T, B, _ = X.shape
        m = W_hh.shape[1]
        Z = F.linear(X, W_hx, b_h)  # (T, B, 3 m): input terms, then g_r, g_u, n
        P = torch.empty_like(Z)  # the recurrent products, b_hn included in the last block
        H = X.new_empty(T + 1, B, m)
        H[0] = h0
        b_p, W_T = torch.cat([b_hn.new_zeros(2 * m), b_hn]), W_hh.T
        Hs, Ps = H.unbind(0), P.unbind(0)
        blocks, gates = _steps(Z, [2 * m, m]), _steps(Z, [m, m, m])
        for t in range(T):
            z_ru, n = blocks[t]
            g_r, g_u, _ = gates[t]
            torch.addmm(b_p, Hs[t], W_T, out=Ps[t])  # (B, 3 m): one product for all blocks
            z_ru.add_(Ps[t][:, :2 * m]).sigmoid_()
            n.addcmul_(g_r, Ps[t][:, 2 * m:]).tanh_()
            torch.lerp(Hs[t], n, g_u, out=Hs[t + 1])
        ctx.save_for_backward(X, Z, P, H, W_hx, W_hh)
        return H[1:], H[-1]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_H, grad_h):
        X, Z, P, H, W_hx, W_hh = ctx.saved_tensors
        T, B, _ = X.shape
        m = W_hh.shape[1]
        delta = torch.empty_like(Z)  # errors of the input terms U (r, u, n)
        delta_p = torch.empty_like(Z)  # errors of the products p (r, u, n)
        gates, errors, p_errors = (_steps(X, [m, m, m]) for X in (Z, delta, delta_p))
        Hs, P_n, grads = H.unbind(0), P[..., 2 * m:].unbind(0), grad_H.unbind(0)
        zeta = grad_H[-1] + grad_h  # zeta^<T> = dC/dh^<T>
        a, b, w, spare = (torch.empty_like(zeta) for _ in range(4))
        for t in range(T - 1, -1, -1):
            g_r, g_u, n = gates[t]
            _, _, d_n = errors[t]
            e_r, e_u, e_n = p_errors[t]
            h_prev = Hs[t]
            torch.mul(zeta, g_u, out=a)  # dC/dn
            torch.mul(a, n, out=b)
            torch.addcmul(a, b, n, value=-1, out=d_n)  # a (1 - n^2)
            torch.mul(d_n, g_r, out=e_n)
            torch.sub(n, h_prev, out=w).mul_(zeta)  # dC/dg_u
            torch.addcmul(w, w, g_u, value=-1, out=e_u).mul_(g_u)  # w g_u (1 - g_u)
            torch.mul(d_n, P_n[t], out=b)  # dC/dg_r
            torch.addcmul(b, b, g_r, value=-1, out=e_r).mul_(g_r)  # b g_r (1 - g_r)
            carried = torch.sub(zeta, a, out=spare).addmm_(delta_p[t], W_hh)  # (7.6)
            if t > 0:
                spare, zeta = zeta, carried.add_(grads[t - 1])
        delta[..., :2 * m] = delta_p[..., :2 * m]  # g_r and g_u add U and p
        needs = ctx.needs_input_grad
        dX, dW_hx, db_h = _input_gradients((needs[0], needs[2], needs[4]), delta, X, W_hx)
        dW_hh = _product_gradient(delta_p, H[:-1]) if needs[3] else None
        db_hn = delta_p[..., 2 * m:].sum((0, 1)) if needs[5] else None
        return dX, carried if needs[1] else None, dW_hx, dW_hh, db_h, db_hn
