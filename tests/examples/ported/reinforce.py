"""pytorch/examples' REINFORCE (reinforcement_learning/reinforce.py), as written there: a policy
network whose softmax output parameterises `torch.distributions.Categorical`, `log_prob` of the
chosen actions saved per step, discounted and normalised returns, Adam, on CartPole (its
equations in numpy: no gym offline). An entropy bonus from `Categorical.entropy()` and a
Gaussian exploration head scored with `Normal.log_prob` and `kl_divergence` are added. The
actions come from numpy uniforms through the policy's own probabilities (inverse CDF) instead
of `m.sample()`, so that two libraries' runs from the same weights can be compared step by step."""

import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical, Normal, kl_divergence


class CartPole:
    """The classic cart-pole (Barto, Sutton and Anderson 1983), as gym's CartPole-v1."""

    def __init__(self, rng):
        self.rng = rng

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        done = abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360
        return self.state.astype(np.float32), 1.0, done


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.0)
        self.affine2 = nn.Linear(128, 2)
        self.noise = nn.Linear(128, 1)
        self.saved_log_probs = []
        self.entropies = []
        self.kls = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1), self.noise(x)


def select_action(policy, state, u, eps):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs, noise_loc = policy(state)
    m = Categorical(probs)
    # m.sample(), drawn from a numpy uniform through the CDF of m's probabilities
    action = (m.probs.detach().cumsum(-1) < float(u)).sum(-1).clamp(max=1)
    explore = Normal(noise_loc.squeeze(-1), torch.ones(1))
    policy.saved_log_probs.append(m.log_prob(action) + explore.log_prob(torch.tensor([eps])))
    policy.entropies.append(m.entropy())
    policy.kls.append(kl_divergence(explore, Normal(torch.zeros(1), torch.ones(1))))
    return action.item()


def finish_episode(policy, optimizer, gamma, episode):
    R = 0
    policy_loss = []
    returns = []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + np.finfo(np.float32).eps.item())
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    entropy = torch.cat(policy.entropies).mean()
    kl = torch.cat(policy.kls).mean()
    loss = torch.cat(policy_loss).sum() - 0.01 * entropy + 0.01 * kl
    loss.backward()
    optimizer.step()
    print(f"LOSS train {episode} 0 {loss.item():.8g}")
    print(f"LOSS entropy {episode} 0 {entropy.item():.8g}")
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    del policy.entropies[:]
    del policy.kls[:]


def main(out_dir):
    torch.manual_seed(543)
    rng = np.random.default_rng(0)
    env = CartPole(np.random.default_rng(1))
    policy = Policy()
    with torch.no_grad():
        for _, p in sorted(policy.named_parameters()):
            p.copy_(torch.from_numpy(rng.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))
    optimizer = optim.Adam(policy.parameters(), lr=1e-2)
    running_reward = 10
    for i_episode in range(1, 9):
        state, ep_reward = env.reset(), 0
        for _ in range(1, 60):
            action = select_action(policy, state, rng.random(), rng.standard_normal())
            state, reward, done = env.step(action)
            policy.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        finish_episode(policy, optimizer, 0.99, i_episode)
        print(f"LOSS reward {i_episode} 0 {running_reward:.8g}")
    torch.save(policy.state_dict(), f"{out_dir}/policy.pt")


if __name__ == "__main__":
    main(sys.argv[1])
