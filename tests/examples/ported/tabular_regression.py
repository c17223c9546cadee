"""Two regressors as blog posts and Kaggle notebooks write them: an MLP on tabular data (missing
values imputed with `nanmean`, features standardised with mean/std over the rows, a categorical
column through an embedding, BatchNorm, HuberLoss, RMSprop with OneCycleLR stepped per batch, then
stochastic weight averaging with `swa_utils.AveragedModel`, SWALR and `update_bn`) and a
stacked LSTM forecasting the next value of a time series from a window (`nn.LSTM(batch_first=True,
num_layers=2)`, the last time step into a Linear head, SmoothL1Loss, Adagrad with
CosineAnnealingWarmRestarts stepped with fractional epochs as its documentation shows). Both are
evaluated under `torch.no_grad()` with the MSE and R² computed with tensor ops, and the LSTM's
state_dict is saved, reloaded and checked. The data are synthetic and drawn with numpy."""

import sys

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

WINDOW = 12


class MLPRegressor(nn.Module):
    def __init__(self, in_features, n_categories, emb_dim=3, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(n_categories, emb_dim)
        self.net = nn.Sequential(
            nn.Linear(in_features + emb_dim, hidden, bias=False),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        # the last column holds the category index
        x_num, x_cat = x[:, :-1], x[:, -1].long()
        x = torch.cat([x_num, self.emb(x_cat)], dim=1)
        return self.net(x).squeeze(-1)


class LSTMForecaster(nn.Module):
    def __init__(self, input_size=2, hidden_size=16, num_layers=2):
        super().__init__()
        self.lstm = nn.LSTM(
            input_size, hidden_size, num_layers=num_layers, batch_first=True, dropout=0.0
        )
        self.head = nn.Linear(hidden_size, 1)

    def forward(self, x):
        out, (h_n, c_n) = self.lstm(x)
        return self.head(out[:, -1, :])


def init_from_numpy(model, rng, scale):
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            p.copy_(torch.from_numpy(rng.uniform(-scale, scale, tuple(p.shape)).astype(np.float32)))


def r2_score(pred, target):
    ss_res = ((target - pred) ** 2).sum()
    ss_tot = ((target - target.mean()) ** 2).sum()
    return 1 - ss_res / ss_tot


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        pred = model(x)
        mse = nn.MSELoss()(pred, y).item()
        r2 = r2_score(pred, y).item()
    return mse, r2


def tabular(rng, out_dir):
    n, d, n_cat = 400, 6, 5
    X = rng.normal(size=(n, d)) * np.array([1.0, 3.0, 0.5, 10.0, 2.0, 1.0]) + np.arange(d)
    cat = rng.integers(n_cat, size=n)
    y = 2.0 * X[:, 0] - 0.3 * X[:, 1] ** 2 / 3 + np.sin(X[:, 2]) + 0.05 * X[:, 3] * X[:, 4]
    y = y + np.array([-1.0, 0.0, 0.5, 1.0, 2.0])[cat] + 0.1 * rng.normal(size=n)
    X[rng.random(X.shape) < 0.05] = np.nan  # missing values
    X = torch.tensor(X, dtype=torch.float32)
    cat = torch.tensor(cat, dtype=torch.long)
    y = torch.tensor(y, dtype=torch.float32)
    X_train, X_test, y_train, y_test = X[:320], X[320:], y[:320], y[320:]
    c_train, c_test = cat[:320], cat[320:]

    # impute with the training means, then standardise
    fill = torch.nanmean(X_train, dim=0, keepdim=True)
    X_train = torch.where(torch.isnan(X_train), fill, X_train)
    X_test = torch.where(torch.isnan(X_test), fill.expand_as(X_test), X_test)
    mean, std = X_train.mean(dim=0, keepdim=True), X_train.std(dim=0, keepdim=True)
    X_train, X_test = (X_train - mean) / std, (X_test - mean) / std
    y_mean, y_std = y_train.mean(), y_train.std()
    y_train_n = (y_train - y_mean) / y_std

    X_train = torch.cat([X_train, c_train.unsqueeze(1).float()], dim=1)
    X_test = torch.cat([X_test, c_test.unsqueeze(1).float()], dim=1)
    loader = DataLoader(TensorDataset(X_train, y_train_n), batch_size=32, shuffle=False)
    model = MLPRegressor(d, n_cat)
    init_from_numpy(model, rng, 0.3)
    criterion = nn.HuberLoss(delta=1.0)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9)
    epochs, swa_epochs = 6, 3
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=0.01, epochs=epochs, steps_per_epoch=len(loader)
    )
    swa_model = torch.optim.swa_utils.AveragedModel(model)
    swa_scheduler = torch.optim.swa_utils.SWALR(optimizer, swa_lr=0.002, anneal_epochs=2)
    for epoch in range(epochs + swa_epochs):
        model.train()
        running = 0.0
        for step, (xb, yb) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            if epoch < epochs:
                scheduler.step()
            running += loss.item() * xb.size(0)
            print(f"LOSS mlp {epoch} {step} {loss.item():.8g}")
        if epoch >= epochs:
            swa_model.update_parameters(model)
            swa_scheduler.step()
        print(f"LOSS mlp_epoch {epoch} 0 {running / len(loader.dataset):.8g}")
        print(f"METRIC mlp_lr_{epoch} {optimizer.param_groups[0]['lr']:.6g}")

    torch.optim.swa_utils.update_bn(loader, swa_model)
    for name, net in (("mlp", model), ("swa", swa_model)):
        net.eval()
        with torch.no_grad():
            pred = net(X_test) * y_std + y_mean
        mse, r2 = nn.functional.mse_loss(pred, y_test).item(), r2_score(pred, y_test).item()
        print(f"LOSS {name}_test 0 0 {mse:.8g}")
        print(f"METRIC {name}_r2 {r2:.6g}")


def make_windows(series, window):
    xs = np.stack([series[i : i + window] for i in range(len(series) - window)])
    ys = series[window:, :1]
    return xs, ys


def forecasting(rng, out_dir):
    t = np.arange(600) * 0.1
    series = np.stack([np.sin(t) + 0.5 * np.sin(3.1 * t), np.cos(0.5 * t)], axis=1)
    series = series + 0.05 * rng.normal(size=series.shape)
    xs, ys = make_windows(series, WINDOW)
    x = torch.from_numpy(xs.astype(np.float32))
    y = torch.from_numpy(ys.astype(np.float32))
    x_train, y_train, x_test, y_test = x[:448], y[:448], x[448:], y[448:]
    mean = x_train.reshape(-1, 2).mean(dim=0, keepdim=True)
    std = x_train.reshape(-1, 2).std(dim=0, keepdim=True)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std

    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64)
    model = LSTMForecaster()
    init_from_numpy(model, rng, 0.25)
    criterion = nn.SmoothL1Loss(beta=0.5)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        optimizer, T_0=2, T_mult=2, eta_min=1e-3
    )
    iters = len(loader)
    for epoch in range(5):
        model.train()
        for i, (xb, yb) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step(epoch + i / iters)
            print(f"LOSS lstm {epoch} {i} {loss.item():.8g}")
        mse, r2 = evaluate(model, x_test, y_test)
        print(f"LOSS lstm_test {epoch} 0 {mse:.8g}")
        print(f"METRIC lstm_r2_{epoch} {r2:.6g}")
        print(f"METRIC lstm_lr_{epoch} {optimizer.param_groups[0]['lr']:.6g}")

    torch.save(model.state_dict(), f"{out_dir}/lstm.pt")
    reloaded = LSTMForecaster()
    reloaded.load_state_dict(torch.load(f"{out_dir}/lstm.pt", weights_only=True))
    reloaded.eval()
    with torch.no_grad():
        same = torch.equal(model(x_test), reloaded(x_test))
    same = same and all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), reloaded.state_dict().values())
    )
    print(f"METRIC reload_equal {int(same)}")


def main(out_dir):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    tabular(rng, out_dir)
    forecasting(rng, out_dir)


if __name__ == "__main__":
    main(sys.argv[1])
