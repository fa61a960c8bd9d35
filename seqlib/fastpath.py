"""The fast path of the recurrent units: backpropagation through time written by hand.

At small batch, autograd's bookkeeping costs more than the arithmetic, so each unit runs the
whole sequence as one `torch.autograd.Function`: forward computes the input terms of all
steps in one product, then loops over time without autograd into preallocated buffers;
backward runs the adjoint recursion (7.6), the errors delta^<t> of the pre-activations
(7.9) and one product with W_hh, the Jacobian (7.11), per step; the weights' gradients,
(7.10), are one product each at the end. Tensors are time-major, x (T, B, p); states are
(B, m); `grad_H[t]` is the part of zeta^<t> = dC/dh^<t> from the outputs of step t.
"""

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable


def _steps(X: torch.Tensor, sizes: list[int]) -> list[tuple]:
    """Views of a time-major X (T, B, n) split into blocks of `sizes` on its last dim, per step."""
    return list(zip(*(block.unbind(0) for block in X.split(sizes, dim=-1)), strict=True))


def _product_gradient(delta: torch.Tensor, operand: torch.Tensor) -> torch.Tensor:
    """sum_t delta^<t>^T operand^<t> for (T, B, n) and (T, B, k): one (n, k) product."""
    T, B, n = delta.shape
    return delta.reshape(T * B, n).T @ operand.reshape(T * B, -1)  # (n, T B) @ (T B, k)


def _input_gradients(needs, delta, X, W_hx):
    """Gradients of x, W_hx and b_h from the errors delta (T, B, G m) of W_hx x + b_h;
    `needs` (three bools) says which are wanted, None for the others."""
    T, B, G = delta.shape
    flat = delta.reshape(T * B, G)  # (T B, G m)
    dX = (flat @ W_hx).view(T, B, -1) if needs[0] else None  # (T, B, p)
    dW_hx = _product_gradient(delta, X) if needs[1] else None
    db_h = flat.sum(0) if needs[2] else None
    return dX, dW_hx, db_h


class RNNScan(torch.autograd.Function):
    """(7.2) over all steps for tanh (S_h' = 1 - h^2) and relu (1 where h > 0). Backward:
    delta^<t> = zeta^<t> S_h'^<t>, and the step before gets W_hh^T delta^<t>."""

    activations = {"tanh": torch.Tensor.tanh_, "relu": torch.Tensor.relu_}  # in place
    slopes = {"tanh": lambda h: 1 - h * h, "relu": lambda h: (h > 0).to(h.dtype)}

    @staticmethod
    def forward(ctx, X, h0, W_hx, W_hh, b_h, nonlinearity):
        T, B, p = X.shape
        m = W_hh.shape[1]
        H = X.new_empty(T + 1, B, m)  # H[t] = h^<t>, h^<0> included
        H[0] = h0
        # W_hx x^<t> + b_h of every step, (T B, m), overwritten by h^<t> in the loop
        torch.addmm(b_h, X.reshape(T * B, p), W_hx.T, out=H[1:].view(T * B, m))
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
        delta = torch.empty_like(slope)
        deltas, slopes, grads = delta.unbind(0), slope.unbind(0), grad_H.unbind(0)
        zeta = grad_H[-1] + grad_h  # zeta^<T>
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
    """(7.16)-(7.17) over all steps, the gate blocks in torch.nn's order (g_i, g_f,
    c_tilde, g_o): one product W_hh h^<t-1> for the four, then c^<t> = g_f c^<t-1> +
    g_i c_tilde and h^<t> = g_o tanh(c^<t>).

    Backward, with zeta = dC/dh^<t> and dc = dC/dc^<t> = g_f^<t+1> dC/dc^<t+1> +
    zeta g_o (1 - tanh(c^<t>)^2), the errors of the pre-activations are
    delta_o = zeta tanh(c) g_o (1 - g_o), delta_i = dc c_tilde g_i (1 - g_i),
    delta_f = dc c^<t-1> g_f (1 - g_f) and delta_c~ = dc g_i (1 - c_tilde^2)."""

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
        gates, g_if = _steps(Z, [m, m, m, m]), Z[..., :2 * m].unbind(0)
        for t in range(T):
            Zs[t].addmm_(Hs[t], W_T)  # (B, 4 m): the products of all four in one
            g_i, g_f, c_tilde, g_o = gates[t]
            g_if[t].sigmoid_()
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
        T = X.shape[0]
        m = W_hh.shape[1]
        delta = torch.empty_like(Z)
        gates, errors = _steps(Z, [m, m, m, m]), _steps(delta, [m, m, m, m])
        Hs, Cs, tanh_cs, grads = H.unbind(0), C.unbind(0), tanh_c.unbind(0), grad_H.unbind(0)
        zeta = grad_H[-1] + grad_h  # zeta^<T>
        kept = grad_c  # g_f^<t+1> dC/dc^<t+1>: what c^<t+1> passes back to c^<t>
        dc, q, r, s, kept_buffer = (torch.empty_like(zeta) for _ in range(5))
        for t in range(T - 1, -1, -1):
            g_i, g_f, c_tilde, g_o = gates[t]
            d_i, d_f, d_c, d_o = errors[t]
            if t < T - 1:  # (7.6)
                zeta = torch.addmm(grads[t], delta[t + 1], W_hh)
            # dc = kept + zeta g_o - q h^<t>, since zeta g_o tanh(c)^2 = q h for q = zeta tanh(c)
            torch.mul(zeta, tanh_cs[t], out=q)
            torch.addcmul(kept, zeta, g_o, out=dc).addcmul_(q, Hs[t + 1], value=-1)
            torch.addcmul(q, q, g_o, value=-1, out=d_o).mul_(g_o)  # q g_o (1 - g_o)
            torch.mul(dc, g_i, out=r)
            torch.mul(r, c_tilde, out=s)
            torch.addcmul(s, s, g_i, value=-1, out=d_i)  # dc c_tilde g_i (1 - g_i)
            torch.addcmul(r, s, c_tilde, value=-1, out=d_c)  # dc g_i (1 - c_tilde^2)
            kept = torch.mul(dc, g_f, out=kept_buffer)  # the old one is used up
            torch.mul(kept, Cs[t], out=s)
            torch.addcmul(s, s, g_f, value=-1, out=d_f)  # dc c^<t-1> g_f (1 - g_f)
        needs = ctx.needs_input_grad
        dX, dW_hx, db_h = _input_gradients((needs[0], needs[3], needs[5]), delta, X, W_hx)
        dh0 = delta[0] @ W_hh if needs[1] else None
        dW_hh = _product_gradient(delta, H[:-1]) if needs[4] else None
        return dX, dh0, kept if needs[2] else None, dW_hx, dW_hh, db_h


class GRUScan(torch.autograd.Function):
    """(7.18)-(7.19) over all steps in the chapter's form, the reset gate applied before the
    product, gate blocks (g_r, g_u, h_tilde): g_r and g_u from one product with the first
    2 m rows of W_hh, h_tilde = tanh(W_h~h (g_r h^<t-1>) + W_h~x x^<t> + b_h~) from the
    last m, then h^<t> = h^<t-1> + g_u (h_tilde - h^<t-1>).

    Backward, with zeta = dC/dh^<t>: delta_h~ = zeta g_u (1 - h_tilde^2); the error of
    g_r h^<t-1> is a = W_h~h^T delta_h~; delta_u = zeta (h_tilde - h^<t-1>) g_u (1 - g_u),
    delta_r = a h^<t-1> g_r (1 - g_r); and h^<t-1> gets zeta (1 - g_u) + a g_r +
    W_hh[:2 m]^T (delta_r, delta_u)."""

    @staticmethod
    def forward(ctx, X, h0, W_hx, W_hh, b_h):
        T, B, _ = X.shape
        m = W_hh.shape[1]
        Z = F.linear(X, W_hx, b_h)  # (T, B, 3 m): input terms, then g_r, g_u, h_tilde
        H = X.new_empty(T + 1, B, m)  # H[t] = h^<t>, h^<0> included
        RH = X.new_empty(T, B, m)  # g_r h^<t-1>, what W_h~h multiplies
        H[0] = h0
        W_ru, W_c = W_hh[:2 * m].T, W_hh[2 * m:].T
        Hs, RHs, gates, z_ru = H.unbind(0), RH.unbind(0), _steps(Z, [m, m, m]), Z[..., :2 * m]
        for t, z in enumerate(z_ru.unbind(0)):
            g_r, g_u, h_tilde = gates[t]
            z.addmm_(Hs[t], W_ru).sigmoid_()  # g_r and g_u, one product for both
            h_tilde.addmm_(torch.mul(g_r, Hs[t], out=RHs[t]), W_c).tanh_()
            torch.lerp(Hs[t], h_tilde, g_u, out=Hs[t + 1])  # (1 - g_u) h + g_u h_tilde
        ctx.save_for_backward(X, Z, H, RH, W_hx, W_hh)
        return H[1:], H[-1]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_H, grad_h):
        X, Z, H, RH, W_hx, W_hh = ctx.saved_tensors
        T = X.shape[0]
        m = W_hh.shape[1]
        W_ru, W_c = W_hh[:2 * m], W_hh[2 * m:]
        delta = torch.empty_like(Z)
        gates, errors, d_ru = _steps(Z, [m, m, m]), _steps(delta, [m, m, m]), delta[..., :2 * m]
        Hs, grads = H.unbind(0), grad_H.unbind(0)
        zeta = grad_H[-1] + grad_h  # zeta^<T>
        a, b, w, back, spare = (torch.empty_like(zeta) for _ in range(5))
        for t in range(T - 1, -1, -1):
            g_r, g_u, h_tilde = gates[t]
            d_r, d_u, d_c = errors[t]
            h_prev = Hs[t]
            torch.mul(zeta, g_u, out=w)  # dC/dh_tilde
            torch.mul(w, h_tilde, out=b)
            torch.addcmul(w, b, h_tilde, value=-1, out=d_c)  # w (1 - h_tilde^2)
            torch.mm(d_c, W_c, out=a)  # dC/d(g_r h^<t-1>)
            # what reaches h^<t-1> directly and through g_r h^<t-1>
            torch.sub(zeta, w, out=back).addcmul_(a, g_r)  # zeta (1 - g_u) + a g_r
            torch.sub(h_tilde, h_prev, out=w).mul_(zeta)  # dC/dg_u
            torch.addcmul(w, w, g_u, value=-1, out=d_u).mul_(g_u)  # w g_u (1 - g_u)
            torch.mul(a, h_prev, out=b)  # dC/dg_r
            torch.addcmul(b, b, g_r, value=-1, out=d_r).mul_(g_r)  # b g_r (1 - g_r)
            back.addmm_(d_ru[t], W_ru)  # ... and through the gates
            if t > 0:  # (7.6)
                zeta, spare = torch.add(back, grads[t - 1], out=spare), zeta
        needs = ctx.needs_input_grad
        dX, dW_hx, db_h = _input_gradients((needs[0], needs[2], needs[4]), delta, X, W_hx)
        dW_hh = None
        if needs[3]:
            dW_hh = torch.cat([_product_gradient(d_ru, H[:-1]),  # (2 m, m)
                               _product_gradient(delta[..., 2 * m:], RH)])  # (m, m)
        return dX, back if needs[1] else None, dW_hx, dW_hh, db_h


class GRUResetAfterScan(torch.autograd.Function):
    """The GRU in PyTorch's form (`reset_after=True`), with input terms U = W_hx x^<t> + b_h
    and one product for all three blocks, P = W_hh h^<t-1> + (0, 0, b_hn):
    g_r, g_u = sigmoid(U_r,u + P_r,u), n = tanh(U_n + g_r P_n), h^<t> = h^<t-1> + g_u (n - h^<t-1>).

    Backward, with zeta = dC/dh^<t>: delta_n = zeta g_u (1 - n^2) is the error of U_n and
    g_r delta_n that of P_n; delta_u = zeta (n - h^<t-1>) g_u (1 - g_u),
    delta_r = delta_n P_n g_r (1 - g_r) are the errors of both U and P in their blocks;
    h^<t-1> gets zeta (1 - g_u) + W_hh^T (delta_r, delta_u, g_r delta_n)."""

    @staticmethod
    def forward(ctx, X, h0, W_hx, W_hh, b_h, b_hn):
        T, B, _ = X.shape
        m = W_hh.shape[1]
        Z = F.linear(X, W_hx, b_h)  # (T, B, 3 m): input terms U, then g_r, g_u, n
        P = torch.empty_like(Z)  # (T, B, 3 m): the products P of every step
        H = X.new_empty(T + 1, B, m)  # H[t] = h^<t>, h^<0> included
        H[0] = h0
        b_p, W_T = torch.cat([b_hn.new_zeros(2 * m), b_hn]), W_hh.T
        Hs, Ps, gates = H.unbind(0), P.unbind(0), _steps(Z, [m, m, m])
        z_ru, P_ru, P_n = Z[..., :2 * m].unbind(0), P[..., :2 * m].unbind(0), P[..., 2 * m:]
        for t, P_n_t in enumerate(P_n.unbind(0)):
            g_r, g_u, n = gates[t]
            torch.addmm(b_p, Hs[t], W_T, out=Ps[t])  # (B, 3 m): one product for all blocks
            z_ru[t].add_(P_ru[t]).sigmoid_()  # g_r and g_u
            n.addcmul_(g_r, P_n_t).tanh_()
            torch.lerp(Hs[t], n, g_u, out=Hs[t + 1])  # (1 - g_u) h + g_u n
        ctx.save_for_backward(X, Z, P_n, H, W_hx, W_hh)
        return H[1:], H[-1]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_H, grad_h):
        X, Z, P_n, H, W_hx, W_hh = ctx.saved_tensors
        T = X.shape[0]
        m = W_hh.shape[1]
        delta = torch.empty_like(Z)  # errors of the input terms U
        delta_p = torch.empty_like(Z)  # errors of the products P
        gates, errors_p = _steps(Z, [m, m, m]), _steps(delta_p, [m, m, m])
        Hs, P_ns, d_n, grads = H.unbind(0), P_n.unbind(0), delta[..., 2 * m:], grad_H.unbind(0)
        zeta = grad_H[-1] + grad_h  # zeta^<T>
        a, b, w, spare = (torch.empty_like(zeta) for _ in range(4))
        for t, d_n_t in zip(range(T - 1, -1, -1), reversed(d_n.unbind(0)), strict=True):
            g_r, g_u, n = gates[t]
            e_r, e_u, e_n = errors_p[t]
            h_prev = Hs[t]
            torch.mul(zeta, g_u, out=a)  # dC/dn
            torch.mul(a, n, out=b)
            torch.addcmul(a, b, n, value=-1, out=d_n_t)  # a (1 - n^2)
            torch.mul(d_n_t, g_r, out=e_n)
            torch.sub(n, h_prev, out=w).mul_(zeta)  # dC/dg_u
            torch.addcmul(w, w, g_u, value=-1, out=e_u).mul_(g_u)  # w g_u (1 - g_u)
            torch.mul(d_n_t, P_ns[t], out=b)  # dC/dg_r
            torch.addcmul(b, b, g_r, value=-1, out=e_r).mul_(g_r)  # b g_r (1 - g_r)
            back = torch.sub(zeta, a, out=spare).addmm_(delta_p[t], W_hh)  # zeta (1 - g_u) + ...
            if t > 0:  # (7.6)
                zeta, spare = back.add_(grads[t - 1]), zeta
        delta[..., :2 * m] = delta_p[..., :2 * m]  # g_r and g_u add U and P
        needs = ctx.needs_input_grad
        dX, dW_hx, db_h = _input_gradients((needs[0], needs[2], needs[4]), delta, X, W_hx)
        dW_hh = _product_gradient(delta_p, H[:-1]) if needs[3] else None
        db_hn = delta_p[..., 2 * m:].sum((0, 1)) if needs[5] else None
        return dX, back if needs[1] else None, dW_hx, dW_hh, db_h, db_hn
