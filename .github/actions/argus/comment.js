// The pull request's one argus comment, updated in place. It is found by its marker (the body's
// first line) AND its author, so a person quoting the marker is never overwritten. A read-only token
// (GitHub gives one to pull requests from forks) answers 403: that leaves a notice and the job summary.
module.exports = async function comment({github, context, core, body, author}) {
  const marker = body.split('\n', 1)[0];
  const {owner, repo} = context.repo;
  const issue_number = context.issue.number;
  try {
    const comments = await github.paginate(github.rest.issues.listComments, {owner, repo, issue_number, per_page: 100});
    const ours = comments.find(c => c.user && c.user.login === author && (c.body || '').startsWith(marker));
    if (ours) {
      await github.rest.issues.updateComment({owner, repo, comment_id: ours.id, body});
      return 'updated';
    }
    await github.rest.issues.createComment({owner, repo, issue_number, body});
    return 'created';
  } catch (error) {
    if (error.status !== 403) throw error;
    core.notice('argus could not comment (403: this token is read-only, as for pull requests from forks); '
                + 'the result is in the job summary.');
    await core.summary.addRaw(body).write();
    return 'notice';
  }
};
